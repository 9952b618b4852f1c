"""The gateway's HTTP protocol writes a response as soon as it is complete."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import server_thread

HOLD_SECONDS = 0.6


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers, then keeps the event loop busy, as work after a response would."""
    if scope["type"] != "http":
        return
    await receive()
    body = b'{"data": {"ok": true}}'
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
    time.sleep(HOLD_SECONDS)  # blocks the loop: nothing else runs until it ends


@pytest.fixture
def server() -> Iterator[int]:
    with server_thread(app) as port:
        yield port


def test_a_response_is_written_when_complete_not_after_its_task(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as client:
        started = time.monotonic()
        client.sendall(b"POST /graphql HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
        reply = b""
        while b'"ok": true}' not in reply:
            chunk = client.recv(65536)
            assert chunk, reply
            reply += chunk
        elapsed = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 200")
    # Written at completion: before the app's task gave the loop back, not after.
    assert elapsed < HOLD_SECONDS / 2, elapsed
