"""A small graphql-transport-ws client for the feed tests, over a real socket."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection, connect

from tests.support import Gateway, sql

PROTOCOL = "graphql-transport-ws"
TIMEOUT = 15.0

FIELDS = "id cursor kind recordId lane actor at payload"
FEED = f"""
subscription($after: String, $lanes: [String!], $kinds: [String!]) {{
  auditEvents(after: $after, lanes: $lanes, kinds: $kinds) {{ {FIELDS} }}
}}
"""


class FeedClient:
    """One socket, acknowledged, that runs subscriptions and collects their messages."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.queues: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())
        self.closed: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                message = json.loads(raw)
                op = message.get("id")
                if op is not None:
                    self.queues.setdefault(op, asyncio.Queue()).put_nowait(message)
        finally:
            if not self.closed.done():
                code = self.ws.close_code if self.ws.close_code is not None else 1006
                self.closed.set_result((code, self.ws.close_reason or ""))

    async def subscribe(self, op: str, query: str = FEED, **variables: Any) -> None:
        self.queues.setdefault(op, asyncio.Queue())
        await self.ws.send(
            json.dumps(
                {"id": op, "type": "subscribe", "payload": {"query": query, "variables": variables}}
            )
        )

    async def message(self, op: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        return await asyncio.wait_for(self.queues.setdefault(op, asyncio.Queue()).get(), timeout)

    async def event(self, op: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The next event of `op`; fails on an error or the end of the stream."""
        message = await self.message(op, timeout)
        assert message["type"] == "next" and "errors" not in message["payload"], message
        event: dict[str, Any] = message["payload"]["data"]["auditEvents"]
        return event

    async def events(self, op: str, count: int, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        return [await self.event(op, max(0.1, deadline - time.monotonic())) for _ in range(count)]

    async def nothing(self, op: str, seconds: float) -> None:
        """Proves that no message arrives for `op` within `seconds`."""
        try:
            message = await self.message(op, seconds)
        except TimeoutError:
            return
        raise AssertionError(f"expected nothing, got {message}")

    async def error(self, op: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The single error that ends `op`, followed by its completion."""
        message = await self.message(op, timeout)
        assert message["type"] == "next", message
        [error] = message["payload"]["errors"]
        assert message["payload"]["data"] is None, message
        assert (await self.message(op, timeout))["type"] == "complete"
        result: dict[str, Any] = error
        return result

    async def stop(self, op: str) -> None:
        await self.ws.send(json.dumps({"id": op, "type": "complete"}))


def small_buffer_socket(url: str, rcvbuf: int) -> socket.socket:
    """A connected TCP socket whose receive buffer is small, to play a slow reader."""
    parts = urlsplit(url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect((parts.hostname or "127.0.0.1", parts.port or 80))
    return sock


@asynccontextmanager
async def feed_client(
    gateway: Gateway | str,
    token: str | None = None,
    sock: socket.socket | None = None,
    max_queue: int = 16,
) -> AsyncIterator[FeedClient]:
    """An acknowledged graphql-transport-ws socket (with `token` in connection_init)."""
    url = gateway if isinstance(gateway, str) else gateway.ws_url
    async with connect(
        url,
        subprotocols=[PROTOCOL],
        open_timeout=TIMEOUT,
        sock=sock,
        max_size=None,
        max_queue=max_queue,
    ) as ws:
        payload = {"authorization": f"Bearer {token}"} if token else {}
        await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
        ack = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
        assert ack["type"] == "connection_ack", ack
        client = FeedClient(ws)
        try:
            yield client
        finally:
            client._reader.cancel()


async def newest_cursor(gateway: Gateway) -> str:
    """The cursor of the newest committed event ("0" when there is none)."""
    async with sql(gateway.database_url) as conn:
        newest = await conn.fetchval("SELECT coalesce(max(seq), 0) FROM audit_events")
    return str(newest)


WATCH_MEMBERS = """
subscription($match: [String!]!) {
  watch(match: $match, initial: true) { change cursor record { id content } }
}
"""


async def no_transaction_waits(gateway: Gateway, seconds: float = 5.0) -> None:
    """Proves that the gateway's connections come to sit in no transaction (a read under
    way may, between its statements, for a moment): fails if some still do after
    `seconds`."""
    deadline = time.monotonic() + seconds
    async with sql(gateway.database_url) as conn:
        while True:
            count = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'edgeloom' AND state = 'idle in transaction'"
            )
            if count == 0:
                return
            assert time.monotonic() < deadline, f"{count} connections idle in transaction"
            await asyncio.sleep(0.02)


@asynccontextmanager
async def watch_idly(
    gateway: Gateway, token: str | None, match: list[str], count: int
) -> AsyncIterator[FeedClient]:
    """`count` watches with `initial: true` on `match` (a gather the watcher sees empty),
    each past its members read once this yields (the hub holds them all)."""
    hub = gateway.state["services"].feed if gateway.state else None
    assert hub is not None
    before = hub.stats().subscribers
    async with feed_client(gateway, token) as client:
        for n in range(count):
            await client.subscribe(f"w{n}", WATCH_MEMBERS, match=match)
        deadline = time.monotonic() + TIMEOUT
        while hub.stats().subscribers < before + count:
            assert time.monotonic() < deadline, "the watches never subscribed"
            await asyncio.sleep(0.01)
        yield client
