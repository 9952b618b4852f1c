"""Every `python` block of the README and docs/ runs as printed against a development
gateway (its address put in place of the one printed), on a thread of its own: the blocks
call the sync client, and `asyncio.run` the async one."""

from __future__ import annotations

import asyncio
import contextlib
import io
from typing import Any

import pytest
from edgeloom_client.langgraph import EdgeloomStore

from tests.clients.conftest import Served
from tests.docs_pages import Block, blocks

PRINTED = "http://127.0.0.1:4000"
PYTHON = blocks("python")


def test_the_docs_show_the_client_and_the_store() -> None:
    pages = {block.page for block in PYTHON}
    assert {"README.md", "docs/clients.md"} <= pages
    shown = "".join(block.text for block in PYTHON if block.page == "README.md")
    assert "Edgeloom(" in shown and "EdgeloomStore(" in shown


def run(block: Block, url: str) -> str:
    printed = io.StringIO()
    names: dict[str, Any] = {}
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(block.text.replace(PRINTED, url), block.name, "exec"), names)
    finally:
        # A reader's program ends and its connections with it; here the suite goes on.
        for value in names.values():
            if isinstance(value, EdgeloomStore):
                value.close()
    return printed.getvalue()


@pytest.mark.parametrize("block", PYTHON, ids=[block.name for block in PYTHON])
async def test_each_python_block_runs_as_printed(block: Block, served: Served) -> None:
    assert PRINTED in block.text, f"{block.name} names no gateway to run against"
    printed = await asyncio.to_thread(run, block, served.url)
    assert printed.strip(), f"{block.name} printed nothing"
