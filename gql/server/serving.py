"""How uvicorn serves the gateway: its options, and an HTTP protocol with one socket
write per response instead of two.

uvicorn writes a response's head when the app sends `http.response.start` and its
body at `http.response.body`: two write system calls for every small answer. On
this kind of machine a system call costs more than the whole compiled read in
Python, so the transport below gathers what one step of the event loop writes and
hands it to the socket at once: when the response is complete, or one loop iteration
later for what is written outside an HTTP response (WebSocket frames).

This protocol, the keepalive one (`gql.server.keepalive`) and the feed's direct frames
(`gql.server.frames`) read and override uvicorn's and websockets' internals, which any release
may change: they are served only on the releases they were tested on, and uvicorn's own
protocols otherwise (the same behaviour, without those savings).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gql.server.keepalive import TickedKeepaliveProtocol
from gql.server.waiting import (
    BODIES,
    DEFAULT_BODY_TIMEOUT,
    MAX_HEADER_BYTES,
    Waiting,
    waiting_of,
)

logger = logging.getLogger(__name__)

NEWEST_TESTED = {"uvicorn": (0, 55), "websockets": (17, 4)}
"""The newest release (major, minor) of each whose internals the protocols here were
tested on; pyproject.toml's lower bounds are the oldest. Raise it after the tests and
`.ci/newest_versions.py` pass on a newer one."""


class GatheringTransport:
    """A transport that passes the writes of one loop iteration on as one write."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        # What is gathered and not yet written (the feed's group writes flush it first).
        self.pending: list[bytes] = []
        self._loop = asyncio.get_running_loop()
        # Called with what the server writes itself, at each write, and with None when it
        # closes the socket, until the callee unsets it (`gql.server.frames.RawSocket.watch`).
        self.touched: Callable[[bytes | bytearray | memoryview | None], None] | None = None

    def _touch(self, data: bytes | bytearray | memoryview | None = None) -> None:
        touched = self.touched
        if touched is not None:
            touched(data)

    @property
    def inner(self) -> Any:
        """The transport it writes to."""
        return self._transport

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.touched is not None:
            self._touch(data)
        if not self.pending:
            self._loop.call_soon(self.flush)
        self.pending.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Hand what is gathered to the socket now."""
        if not self.pending:
            return
        data = b"".join(self.pending)
        self.pending.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self._touch()
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._touch()
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._touch()
        self.pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        held: int = self._transport.get_write_buffer_size()
        return held + sum(map(len, self.pending))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GatheringHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a `GatheringTransport`; a response is written as
    soon as it is complete, not after the rest of its task's step. While it waits for a
    request's headers, or for the rest of a request's body, it counts among the app's
    waiting connections (`gql.server.waiting`)."""

    _waiting: Waiting | None = None
    _header_bytes = -1  # bytes of headers received so far; -1: not waiting for any
    # The bytes of the request line's target and header lines the parser has given,
    # counted however they arrived (in one read the headers are complete before the
    # count above sees them), and whether they went over MAX_HEADER_BYTES.
    _parsed_header_bytes = 0
    _oversized = False
    _bodies: Waiting | None = None
    _body_due = False  # the parsed request's body has not all arrived
    _body_waiting = False  # ... and it counts among the connections waiting for a body

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self._gathering = GatheringTransport(transport)
        super().connection_made(self._gathering)  # type: ignore[arg-type]
        self._waiting = waiting_of(self.app_state)
        self._bodies = waiting_of(self.app_state, BODIES)
        self._wait()

    def _wait(self) -> None:
        if self._waiting is not None:
            self._header_bytes = 0
            self._waiting.start(self)

    def _waited(self) -> None:
        if self._waiting is not None:
            self._header_bytes = -1
            self._waiting.stop(self)

    def give_up(self) -> None:
        """Closed for waiting too long, or to make room for a newer connection."""
        if self._body_waiting:
            self._body_waiting = False
            self._refuse_body()
            return
        self._header_bytes = -1
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._header_bytes >= 0:
            self._header_bytes += len(data)
            if self._header_bytes > MAX_HEADER_BYTES and not self.transport.is_closing():
                self._waited()
                self._refuse_headers()
        # Counted only once a read ends with the body still due: one that came with its
        # headers (nearly every request) costs nothing here.
        if (
            self._body_due
            and not self._body_waiting
            and self._bodies is not None
            and not self.transport.is_closing()
        ):
            self._body_waiting = True
            self._bodies.start(self)

    def _body_arrived(self) -> None:
        self._body_due = False
        if self._body_waiting:
            self._body_waiting = False
            if self._bodies is not None:
                self._bodies.stop(self)

    def _refuse_body(self) -> None:
        """The body did not arrive in time: 408 unless the answer began, and closed; the
        app, waiting to read the body, is told the client left."""
        cycle = self.cycle
        if not self.transport.is_closing():
            if cycle is not None and not cycle.response_started:
                seconds = DEFAULT_BODY_TIMEOUT if self._bodies is None else self._bodies.timeout
                self._refuse(
                    b"408 Request Timeout",
                    f"the request's body did not arrive within {seconds:g} seconds of its "
                    "headers, the most the gateway waits for one; send the body with the "
                    "headers",
                )
            else:
                self.transport.close()
        if cycle is not None:
            cycle.disconnected = True
            cycle.message_event.set()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._parsed_header_bytes = 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._parsed(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._parsed(len(name) + len(value) + len(b": \r\n"))

    def _parsed(self, size: int) -> None:
        self._parsed_header_bytes += size
        if self._parsed_header_bytes > MAX_HEADER_BYTES:
            # Raised through the parser, which stops before the request reaches the app;
            # uvicorn then answers the parser's failure (send_400_response below).
            self._oversized = True
            raise _HeadersTooLargeError

    def send_400_response(self, msg: str) -> None:
        if self._oversized:
            self._waited()
            self._refuse_headers()
            return
        super().send_400_response(msg)

    def _refuse_headers(self) -> None:
        self._refuse(
            b"431 Request Header Fields Too Large",
            f"the request's headers are over {MAX_HEADER_BYTES} bytes, the most the gateway reads",
        )

    def _refuse(self, status: bytes, text: str) -> None:
        """Answers `status` with `text` outside any request's cycle, and closes."""
        message = text.encode()
        self.transport.write(
            b"HTTP/1.1 %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (status, len(message), message)
        )
        self.transport.close()

    def on_headers_complete(self) -> None:
        self._waited()
        super().on_headers_complete()
        # An upgrade's request has no body (the WebSocket takes the connection over).
        self._body_due = not (self.parser.should_upgrade() and self._should_upgrade())

    def on_response_complete(self) -> None:
        self._gathering.flush()
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        # A response may end before its request's body does (a 413 answered from the
        # length): the bytes still coming are that body, not the next request's headers.
        if not pipelined and not self.cycle.more_body:
            self._wait_for_next()

    def on_message_complete(self) -> None:
        self._body_arrived()
        super().on_message_complete()
        # An upgrade's request has no cycle of its own (a WebSocket takes the connection
        # over); otherwise the body of a request already answered has just ended.
        upgrade = self.parser.should_upgrade()
        cycle = self.cycle
        if not upgrade and cycle is not None and cycle.response_complete and not self.pipeline:
            self._wait_for_next()

    def _wait_for_next(self) -> None:
        if not self.transport.is_closing():
            self._wait()  # kept alive: waiting for the next request

    def connection_lost(self, exc: Exception | None) -> None:
        self._waited()
        self._body_arrived()
        super().connection_lost(exc)


class _HeadersTooLargeError(Exception):
    """A request's headers went over MAX_HEADER_BYTES while being parsed."""


def release(text: str) -> tuple[int, int]:
    """The (major, minor) of a version string; a pre-release counts as its release."""
    found = re.match(r"(\d+)(?:\.(\d+))?", text)
    if found is None:
        raise ValueError(f"not a version: {text!r}")
    return int(found[1]), int(found[2] or 0)


def untested_releases() -> list[str]:
    """The installed packages (name and version) newer than `NEWEST_TESTED`."""
    installed = {name: version(name) for name in NEWEST_TESTED}
    return [
        f"{name} {found}"
        for name, found in installed.items()
        if release(found) > NEWEST_TESTED[name]
    ]


def server_options(ws_compression: bool = False) -> dict[str, Any]:
    """The uvicorn options `edgeloom serve` runs with (the tests' gateways run the same).

    permessage-deflate is off unless asked for: a feed event is a few hundred bytes,
    and compressing every frame on its own connection costs both ends more CPU per
    delivery than the bytes it saves on any network a gateway runs on. WebSockets are
    uvicorn's websockets-sansio protocol (`gql.server.frames` writes to it) with the keepalive
    pings of every connection on one timer (`gql.server.keepalive`), or uvicorn's own protocols
    on releases newer than those tested.
    """
    untested = untested_releases()
    if untested:
        logger.warning(
            "%s: newer than the releases edgeloom's own server protocols were tested on; "
            "serving with uvicorn's (slower under many subscribers, otherwise the same)",
            ", ".join(untested),
        )
        protocols: dict[str, Any] = {"http": "httptools", "ws": "websockets-sansio"}
    else:
        protocols = {"http": GatheringHttpToolsProtocol, "ws": TickedKeepaliveProtocol}
    return {**protocols, "ws_per_message_deflate": ws_compression}
