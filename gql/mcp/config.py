"""`edgeloom mcp --print-config`: what an agent runtime needs to reach the tools."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from gql.mcp.http import PATH

PLACEHOLDER = "<token from 'edgeloom token create --agent NAME'>"


def config(token: str | None, url: str, data_dir: Path) -> dict[str, Any]:
    """An `mcpServers` object: `edgeloom` over stdio, `edgeloom-http` over HTTP."""
    launched = Path(sys.argv[0])
    found = shutil.which("edgeloom") or "edgeloom"
    command = str(launched.resolve()) if launched.name == "edgeloom" else found
    args = ["mcp"]
    env = {"EDGELOOM_TOKEN": token or PLACEHOLDER}
    if os.environ.get("DATABASE_URL"):
        env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    else:
        # An agent runtime starts the command in a folder of its own choosing.
        args += ["--data-dir", str(Path(data_dir).resolve())]
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
