"""The HTTP floor: what answering over HTTP alone costs, with no GraphQL work at all.

A bare ASGI callable under the gateway's own server (uvicorn, uvloop, httptools) that
answers each recorded request body by running the statement the gateway ran for it
(looked up by the body's bytes) on one asyncpg connection and passing the response
text through. What it adds to the raw client's latency is the HTTP hop: the client's
request and the server's reply over loopback TCP, waking the server, uvicorn. The
gateway's figure minus the floor's is what the gateway does beyond that.

Run by the bench as `python -m uvicorn bench.floor:app`; EDGELOOM_FLOOR_DSN names the
database and EDGELOOM_FLOOR_TABLE a pickle of {request body: (sql, params)}.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.raw import codecs
from bench.server import REPO, free_port

Table = dict[bytes, tuple[str, list[Any]]]

_state: dict[str, Any] = {}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                conn = await asyncpg.connect(os.environ["EDGELOOM_FLOOR_DSN"])
                await codecs(conn)  # the raw client's, so parameters travel alike
                _state["conn"] = conn
                with open(os.environ["EDGELOOM_FLOOR_TABLE"], "rb") as table:
                    _state["table"] = pickle.load(table)
                await send({"type": "lifespan.startup.complete"})
            else:
                await _state["conn"].close()
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    found = _state["table"].get(body)
    if found is None:  # the readiness probe, or a body the bench did not record
        await _send(send, 404, b'{"errors": [{"message": "not recorded"}]}')
        return
    sql, params = found
    row = await _state["conn"].fetchrow(sql, *params)
    await _send(send, 200, row["body"].encode())


async def _send(send: Any, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def floor_process(dsn: str, table: Table, log_dir: Path) -> AsyncIterator[int]:
    """The floor server on a free port, answering the bodies in `table`."""
    port = free_port()
    table_file = log_dir / f"floor-{port}.pickle"
    table_file.write_bytes(pickle.dumps(table))
    env = {**os.environ, "EDGELOOM_FLOOR_DSN": dsn, "EDGELOOM_FLOOR_TABLE": str(table_file)}
    with (log_dir / f"floor-{port}.log").open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "bench.floor:app", "--port", str(port)]
            + ["--loop", "uvloop", "--http", "httptools", "--no-access-log"]
            + ["--log-level", "warning"],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        async with httpx.AsyncClient() as client:
            while True:
                try:
                    await client.post(f"http://127.0.0.1:{port}/graphql", content=b"{}")
                    break
                except httpx.TransportError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(
                            f"the floor server did not start; see {sink.name}"
                        ) from None
                    await asyncio.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(10)
