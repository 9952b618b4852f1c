"""`edgeloom mcp --print-config`: what an agent runtime needs to reach the tools, for the
mode the memory's gateway is in."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import asyncpg

from gql.mcp.http import PATH
from gql.server.policy_startup import development_lineage
from store.pool import plain_url

PLACEHOLDER = "<token from 'edgeloom token create --agent NAME'>"


async def development_mode(url: str) -> bool:
    """Whether the memory at `url` is served without a token, as `serve` without a policy
    file decides it (`gql.server.policy_startup.development_lineage`)."""
    conn = await asyncpg.connect(plain_url(url))
    try:
        return await development_lineage(conn)
    except asyncpg.UndefinedTableError:
        return True  # never migrated: a first `serve` migrates and applies it
    finally:
        await conn.close()


def config(token: str | None, url: str, data_dir: Path, development: bool) -> dict[str, Any]:
    """An `mcpServers` object: `edgeloom` over stdio, `edgeloom-http` over HTTP. Without
    a token, a development gateway is configured with none (a placeholder would be sent
    and refused); any other with a placeholder to fill in."""
    launched = Path(sys.argv[0])
    found = shutil.which("edgeloom") or "edgeloom"
    command = str(launched.resolve()) if launched.name == "edgeloom" else found
    args = ["mcp"]
    bearer = token or (None if development else PLACEHOLDER)
    env = {} if bearer is None else {"EDGELOOM_TOKEN": bearer}
    if os.environ.get("DATABASE_URL"):
        env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    else:
        # An agent runtime starts the command in a folder of its own choosing.
        args += ["--data-dir", str(Path(data_dir).resolve())]
    stdio: dict[str, Any] = {"command": command, "args": args}
    if env:
        stdio["env"] = env
    http: dict[str, Any] = {"type": "http", "url": url.rstrip("/") + PATH}
    if bearer is not None:
        http["headers"] = {"Authorization": f"Bearer {bearer}"}
    return {"mcpServers": {"edgeloom": stdio, "edgeloom-http": http}}


def print_config(token: str | None, url: str, data_dir: Path, development: bool) -> None:
    print(json.dumps(config(token, url, data_dir, development), indent=2))
