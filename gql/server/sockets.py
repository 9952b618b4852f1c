"""Caps on a process's open WebSocket connections, so that sockets never take the file
descriptors HTTP requests and the database need. A subscription streamed over HTTP (GraphQL
over SSE) holds its connection as long as a socket does, and counts as an authenticated one:
it is authorised from its headers before its stream starts.

A connection counts as unauthenticated from its upgrade until the gateway acknowledges
its `connection_init` (`authenticated`); those are capped per process and per client
address, and every connection is capped per process. An upgrade over a cap is answered
HTTP 503 before it is accepted, so the refused socket is closed at once.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import Counter
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from gql.api.errors import refusal_response
from gql.server.descriptors import HTTP_HEADROOM, LOG_EVERY_SECONDS

log = logging.getLogger("edgeloom.sockets")

# The client is told to wait this long before it connects again.
RETRY_AFTER_SECONDS = 5
TRY_AGAIN_LATER = 1013
_SLOT = "edgeloom.socket"


@dataclass(frozen=True)
class SocketCaps:
    """How many WebSocket connections one process holds at once."""

    total: int
    unauthenticated: int
    unauthenticated_per_address: int


def open_files_limit() -> int:
    """The process's open-file limit, raised first to its hard limit (as Go's runtime and
    most servers do: the soft limit stays low only for programs still using select())."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        return soft if soft != resource.RLIM_INFINITY else 2**31 - 1
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open-file limit from %d to %d: %s", soft, hard, exc)
        return soft
    log.info("raised the open-file limit from %d to its hard limit %d", soft, hard)
    return hard


def fitted(caps: SocketCaps, open_files: int) -> SocketCaps:
    """`caps`, lowered where the open-file limit leaves room for fewer sockets (logged)."""
    room = open_files - min(HTTP_HEADROOM, open_files // 4)
    if caps.total <= room:
        return caps
    log.warning(
        "the open-file limit (%d) leaves room for %d WebSocket connections, fewer than "
        "the %d configured; raise it (ulimit -n, LimitNOFILE=) to hold more",
        open_files,
        room,
        caps.total,
    )
    return SocketCaps(
        room,
        min(caps.unauthenticated, room),
        min(caps.unauthenticated_per_address, room),
    )


class _DenialLine(logging.Filter):
    """uvicorn's websockets-sansio protocol logs an error after every denial response
    (Kludex/uvicorn#3138: it never marks the handshake done), which under a flood of
    refused upgrades is one error line each. A refusal sets `expected` just before the
    app returns; uvicorn logs that line at once, before the loop runs anything else, and
    the loop's next turn clears it, so only that line is dropped."""

    LINE = "ASGI callable returned without completing handshake."

    def __init__(self) -> None:
        super().__init__()
        self.expected = False

    def expect(self) -> None:
        self.expected = True
        asyncio.get_running_loop().call_soon(self._clear)

    def _clear(self) -> None:
        self.expected = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.expected and record.msg == self.LINE)


_denial_line = _DenialLine()


class SocketLimits:
    """Counts the process's WebSocket connections and refuses an upgrade over a cap."""

    def __init__(self, app: ASGIApp, caps: SocketCaps) -> None:
        logging.getLogger("uvicorn.error").addFilter(_denial_line)
        self.app = app
        self.caps = caps
        self.open = 0
        self.unauthenticated = 0
        self.by_address: Counter[str] = Counter()
        self._logged: dict[str, float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            # A GraphQL subscription as server-sent events (the MCP endpoint's streams are
            # requests of the MCP server's own, outside these caps).
            if scope["type"] == "http" and scope["path"] == "/graphql" and is_event_stream(scope):
                await self._stream(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return
        address = scope["client"][0] if scope.get("client") else ""
        refusal = self._refusal(address)
        if refusal is not None:
            await self._refuse(scope, receive, send, *refusal)
            return
        slot = _Slot(self, address)
        scope[_SLOT] = slot
        try:
            await self.app(scope, receive, send)
        finally:
            slot.release()

    async def _stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An HTTP request for an event stream, within the cap on all connections."""
        if self.open >= self.caps.total:
            total = self.caps.total
            response = refusal_response(
                503,
                f"{total} WebSocket and event-stream connections are open, the most one "
                "gateway process holds; connect again later or to another replica",
                "SERVICE_UNAVAILABLE",
                {"maxConnections": total},
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
            await response(scope, receive, send)
            return
        slot = _Slot(self, "")
        slot.authenticate()
        try:
            await self.app(scope, receive, send)
        finally:
            slot.release()

    def _refusal(self, address: str) -> tuple[str, str, dict[str, object]] | None:
        """(why, for the log and the body; the close reason; details) of a refusal."""
        caps = self.caps
        if self.open >= caps.total:
            return (
                f"{caps.total} WebSocket connections are open, the most one gateway process "
                "holds; connect again later or to another replica",
                f"Try again later: {caps.total} connections open, the most allowed",
                {"maxConnections": caps.total},
            )
        if self.unauthenticated >= caps.unauthenticated:
            return (
                f"{caps.unauthenticated} WebSocket connections are waiting for their "
                "connection_init, the most one gateway process holds; connect again later "
                "and send connection_init at once",
                f"Try again later: {caps.unauthenticated} connections await connection_init",
                {"maxUnauthenticated": caps.unauthenticated},
            )
        if self.by_address[address] >= caps.unauthenticated_per_address:
            return (
                f"{caps.unauthenticated_per_address} WebSocket connections from this address "
                "are waiting for their connection_init, the most one address may hold; "
                "send connection_init on those before opening more",
                f"Try again later: {caps.unauthenticated_per_address} connections from this "
                "address await connection_init",
                {"maxUnauthenticatedPerAddress": caps.unauthenticated_per_address},
            )
        return None

    async def _refuse(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        why: str,
        reason: str,
        details: dict[str, object],
    ) -> None:
        now = time.monotonic()
        cap = next(iter(details))
        if now - self._logged.get(cap, -LOG_EVERY_SECONDS) >= LOG_EVERY_SECONDS:
            self._logged[cap] = now
            log.warning(
                "WebSocket upgrades refused (logged once per %gs): %s", LOG_EVERY_SECONDS, why
            )
        await receive()  # websocket.connect
        if "websocket.http.response" in scope.get("extensions", {}):
            response = refusal_response(
                503,
                why,
                "SERVICE_UNAVAILABLE",
                details,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": response.status_code,
                    "headers": response.raw_headers,
                }
            )
            await send({"type": "websocket.http.response.body", "body": response.body})
            _denial_line.expect()
            return
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": TRY_AGAIN_LATER, "reason": reason})


class _Slot:
    """One open connection's place in the counts."""

    def __init__(self, limits: SocketLimits, address: str) -> None:
        self.limits = limits
        self.address = address
        self.waiting = True
        limits.open += 1
        limits.unauthenticated += 1
        limits.by_address[address] += 1

    def authenticate(self) -> None:
        if not self.waiting:
            return
        self.waiting = False
        limits = self.limits
        limits.unauthenticated -= 1
        limits.by_address[self.address] -= 1
        if not limits.by_address[self.address]:
            del limits.by_address[self.address]

    def release(self) -> None:
        self.limits.open -= 1
        self.authenticate()


def is_event_stream(scope: Scope) -> bool:
    """Whether an HTTP request asks for its answer as server-sent events."""
    for name, value in scope.get("headers", ()):
        if name == b"accept" and any(
            part.split(b";", 1)[0].strip().lower() == b"text/event-stream"
            for part in value.split(b",")
        ):
            return True
    return False


def authenticated(scope: Scope) -> None:
    """The connection of `scope` had its connection_init acknowledged: it no longer counts
    against the caps on unauthenticated connections."""
    slot = scope.get(_SLOT)
    if isinstance(slot, _Slot):
        slot.authenticate()
