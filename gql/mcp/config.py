"""`edgeloom mcp --print-config`: what an agent runtime needs to reach the tools."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from gql.mcp.http import PATH
from store.database import DEFAULT_DATA_DIR

PLACEHOLDER = "<token from 'edgeloom token create --agent NAME'>"


def config(token: str | None, url: str, data_dir: Path) -> dict[str, Any]:
    """An `mcpServers` object: `edgeloom` over stdio, `edgeloom-http` over HTTP."""
    command = shutil.which("edgeloom") or str(Path(sys.argv[0]).resolve())
    args = ["mcp"]
    if Path(data_dir) != DEFAULT_DATA_DIR:
        args += ["--data-dir", str(Path(data_dir).resolve())]
    env = {"EDGELOOM_TOKEN": token or PLACEHOLDER}
    if os.environ.get("DATABASE_URL"):
        env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    return {
        "mcpServers": {
            "edgeloom": {"command": command, "args": args, "env": env},
            "edgeloom-http": {
                "type": "http",
                "url": url.rstrip("/") + PATH,
                "headers": {"Authorization": f"Bearer {token or PLACEHOLDER}"},
            },
        }
    }


def print_config(token: str | None, url: str, data_dir: Path) -> None:
    print(json.dumps(config(token, url, data_dir), indent=2))
