"""The README's first session is true as printed: each `graphql` block of "Every mutation,
with what it answers" runs, in order, against a development gateway, and answers what the
`json` block after it shows. Ids and instants differ from run to run: an id the README shows
stands for the one this run returned at the same place, and is put in its place (a printed
prefix too) in every later document; an instant matches any instant."""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GatewayFactory
from tests.gql.test_serve import call, serving
from tests.support import EDGELOOM, REPO, Gateway, communicate_within

SECTION = "### Every mutation, with what it answers"
HEADING = re.compile(r"^#{1,3} ", re.MULTILINE)
PAIR = re.compile(r"^```graphql\n(.*?)^```\n+^```json\n(.*?)^```", re.MULTILINE | re.DOTALL)
ID = re.compile(r"^(sr_[0-9a-f]{32}|edge_[0-9a-f]{32}|ep_[0-9a-f]{32}|e_\w+:\w+_[0-9a-f]{32})$")
SHORT_RECORD_ID = re.compile(r"\bsr_[0-9a-f]{6,32}\b")
INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


@dataclass(frozen=True)
class Step:
    document: str
    shown: Any


def session_steps() -> list[Step]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index(SECTION)
    end = HEADING.search(readme, start + len(SECTION))
    section = readme[start : end.start() if end else None]
    return [Step(document, json.loads(shown)) for document, shown in PAIR.findall(section)]


class Ids:
    """The ids the README shows, each with the one this run returned in its place."""

    def __init__(self) -> None:
        self.actual: dict[str, str] = {}

    def learn(self, shown: Any, got: Any, where: str) -> None:
        """Checks `got` against `shown`, learning the ids; fails naming the first place
        they differ."""
        if isinstance(shown, dict):
            assert isinstance(got, dict) and got.keys() == shown.keys(), (where, shown, got)
            for key, value in shown.items():
                self.learn(value, got[key], f"{where}.{key}")
        elif isinstance(shown, list):
            assert isinstance(got, list) and len(got) == len(shown), (where, shown, got)
            for index, (value, item) in enumerate(
                zip(self._in_order_of(shown, got), got, strict=True)
            ):
                self.learn(value, item, f"{where}[{index}]")
        elif isinstance(shown, str) and ID.match(shown):
            assert isinstance(got, str) and ID.match(got), (where, shown, got)
            known = self.actual.setdefault(shown, got)
            assert known == got, f"{where}: {shown} stood for {known} before, now {got}"
        elif isinstance(shown, str) and INSTANT.match(shown):
            assert isinstance(got, str) and INSTANT.match(got), (where, shown, got)
        else:
            assert got == shown, (where, shown, got)

    def _in_order_of(self, shown: list[Any], got: list[Any]) -> list[Any]:
        """`shown` in the order of `got` where its items are records already seen: lists
        ordered by id come in another order when the ids differ."""
        got_ids = [_id_of(item) for item in got]
        wanted = [self.actual.get(_id_of(item) or "") for item in shown]
        if None in wanted or sorted(wanted) != sorted(got_ids):  # type: ignore[type-var]
            return shown
        return [shown[wanted.index(got_id)] for got_id in got_ids]

    def put_in(self, document: str) -> str:
        for shown, got in self.actual.items():
            document = document.replace(shown, got)

        def record(match: re.Match[str]) -> str:
            full = [got for shown, got in self.actual.items() if shown.startswith(match[0])]
            return full[0] if len(full) == 1 else match[0]

        return SHORT_RECORD_ID.sub(record, document)


def _id_of(item: Any) -> str | None:
    value = item.get("id") if isinstance(item, dict) else item
    return value if isinstance(value, str) and ID.match(value) else None


def test_the_section_shows_every_mutation() -> None:
    from gql.api.schema import schema

    mutations = set(schema._schema.mutation_type.fields)  # type: ignore[union-attr]
    shown = {
        name
        for step in session_steps()
        for name in mutations
        if re.search(rf"\bmutation\b[^{{]*\{{\s*(\w+:\s*)?{name}\(", step.document)
    }
    assert shown == mutations, f"not shown: {sorted(mutations - shown)}"


async def test_every_step_answers_as_shown(gateway: Gateway) -> None:
    ids = Ids()
    for number, step in enumerate(session_steps(), start=1):
        got = await gateway.post(ids.put_in(step.document))
        ids.learn(step.shown, got, f"step {number}")


SEARCH_SECTION = "### Search: ask in your own words"
FIRST_SESSION = "## A first session"
FIRST_INGEST = re.compile(r"^mutation \{\n  ingest\(.*?^\}$", re.MULTILINE | re.DOTALL)


def section_pairs(heading: str) -> list[Step]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index(heading)
    end = HEADING.search(readme, start + len(heading))
    section = readme[start : end.start() if end else None]
    return [Step(document, json.loads(shown)) for document, shown in PAIR.findall(section)]


async def test_the_search_examples_answer_the_first_session_as_shown(
    start_gateway: GatewayFactory,
) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first = readme[readme.index(FIRST_SESSION) :]
    ingest = FIRST_INGEST.search(first)
    assert ingest is not None, "the first session's ingest is not in the README"
    gateway = await start_gateway(anonymous_agent="dev")
    await gateway.post(ingest[0])
    steps = section_pairs(SEARCH_SECTION)
    assert len(steps) >= 2
    ids = Ids()
    for number, step in enumerate(steps, start=1):
        ids.learn(step.shown, await gateway.post(step.document), f"search example {number}")


@pytest.mark.over10s("an `edgeloom serve` process started after the session, as scripts/serve")
async def test_the_next_start_still_answers_the_reader(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    """The session ends with a policy of its own in force: the next `scripts/serve` (no
    policy file) still serves the reader without a token, and `mcp --print-config` says
    so, as the README's last block promises."""
    gateway = await start_gateway(anonymous_agent="dev")
    ids = Ids()
    for number, step in enumerate(session_steps(), start=1):
        ids.learn(step.shown, await gateway.post(ids.put_in(step.document)), f"step {number}")
    async with serving(gateway.database_url, tmp_path) as served:
        answer = await call(served.client, served.url, "{ profile { agent } policy { version } }")
    assert answer == {"data": {"profile": {"agent": "dev"}, "policy": {"version": 2}}}, answer
    assert "development mode: requests without a token act as agent 'dev'" in served.log.read_text()
    process = await asyncio.create_subprocess_exec(
        str(EDGELOOM),
        "mcp",
        "--print-config",
        env={**os.environ, "DATABASE_URL": gateway.database_url},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await communicate_within(process, "edgeloom mcp --print-config")
    assert process.returncode == 0, err
    servers = json.loads(out)["mcpServers"]
    assert "env" not in servers["edgeloom"] or "EDGELOOM_TOKEN" not in servers["edgeloom"]["env"]
    assert "headers" not in servers["edgeloom-http"], servers
