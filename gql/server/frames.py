"""Writing the live feed's messages to a socket as ready-made frames, many sockets per loop.

A message for a group of subscribers is the same bytes for each member that runs the
operation under the same id: the frames are built once (by websockets' own serializer, so
the bytes are those uvicorn would write) and written to each member's transport from the
hub's fan-out loop, with no task woken and no pass through Starlette's and uvicorn's send
for each. Several events of one read go out in one write.

This works on the gateway's own websockets-sansio protocol only (`gql.server.serving` serves it
on the uvicorn and websockets releases it was tested on, uvicorn's own otherwise), and
only while nothing stands in the way of a frame written directly: the handshake done, no
close sent, no extension (permessage-deflate changes the bytes), no fragmented message in
progress, and the transport not pushing back. Otherwise the caller sends the ordinary
way, which waits for the socket and so keeps the slow-consumer rule (docs/feed_hub.md).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from starlette.types import Scope, Send
from websockets.frames import Frame, Opcode
from websockets.protocol import State

from gql.server.keepalive import TickedKeepaliveProtocol
from gql.server.serving import GatheringTransport

RAW_SEND = "edgeloom.raw_send"
"""The scope key under which the app keeps the server's own `send` for a WebSocket."""


def text_frames(texts: Iterable[str]) -> bytes:
    """The frames of `texts`, one unmasked text frame each, as a server writes them (the
    feed's `FrameEncoder`, handed to the hub at start)."""
    return b"".join(
        Frame(Opcode.TEXT, text.encode()).serialize(mask=False, extensions=[]) for text in texts
    )


class RawSocket:
    """The transport under one WebSocket, for frames built elsewhere: the feed's
    `gql.feed.outlet.SocketOutlet` on this server."""

    def __init__(self, protocol: TickedKeepaliveProtocol) -> None:
        self._protocol = protocol
        # Set once the handshake is done without extensions, which stays so.
        self._inner: Any = None
        self._gathering: GatheringTransport | None = None
        self._watchers: dict[Hashable, Callable[[], None]] = {}

    def ready(self) -> bool:
        """Whether a frame may be written directly now (see the module's docstring)."""
        p = self._protocol
        conn: Any = p.conn
        if self._inner is None:
            if not p.handshake_complete or conn.extensions:
                return False
            transport: Any = p.transport
            if isinstance(transport, GatheringTransport):
                self._gathering, transport = transport, transport.inner
            self._inner = transport
        return (
            conn.state is State.OPEN
            and not p.close_sent
            and not p.disconnected
            and p.writable.is_set()
            and not conn.expect_continuation_frame
            and not self._inner.is_closing()
        )

    def drained(self) -> bool:
        """Whether everything written to it so far has gone to the socket."""
        gathering = self._gathering
        return not (gathering is not None and gathering.pending) and not (
            self._inner.get_write_buffer_size()
        )

    @property
    def transport(self) -> Any:
        """The transport frames are written to; only once `ready` said so."""
        return self._inner

    def watch(self, key: Hashable, callback: Callable[[], None]) -> bool:
        """Call `callback` once, at the next write the server makes to this socket itself
        (a close, an ordinary send) or when it closes it: until then nothing but the
        frames written here went out, so what `ready` found still holds but for the
        transport pushing back or closing. A keepalive ping or pong alone does not count:
        a control frame may go out before or after any whole message, and changes nothing
        `ready` looks at. False, and nothing watched, when the socket cannot tell (not on
        a gathering transport)."""
        gathering = self._gathering
        if gathering is None:
            return False
        self._watchers[key] = callback
        gathering.touched = self._touched
        return True

    def unwatch(self, key: Hashable) -> None:
        self._watchers.pop(key, None)
        if not self._watchers and self._gathering is not None:
            self._gathering.touched = None

    def _touched(self, data: bytes | bytearray | memoryview | None) -> None:
        if data is not None and _ping_or_pong(data):
            return
        assert self._gathering is not None
        self._gathering.touched = None
        watchers = list(self._watchers.values())
        self._watchers.clear()
        for callback in watchers:
            callback()

    def write(self, frames: bytes) -> None:
        """Write `frames` after anything gathered before; only once `ready` said so."""
        gathering = self._gathering
        if gathering is not None and gathering.pending:
            gathering.flush()  # already one write: straight to the socket, in order
        self._inner.write(frames)


_PING_OR_PONG = (0x89, 0x8A)  # the first byte of a ping, and of a pong: FIN and the opcode


def _ping_or_pong(data: bytes | bytearray | memoryview) -> bool:
    """Whether `data` is one whole unmasked ping or pong frame, as the server writes them
    (a control frame's payload is at most 125 bytes)."""
    return len(data) >= 2 and data[0] in _PING_OR_PONG and len(data) == 2 + data[1] <= 127


def keep_raw_send(scope: Scope, send: Send) -> None:
    """Remember the server's `send` of a WebSocket scope, before any middleware wraps it."""
    if scope["type"] == "websocket":
        scope[RAW_SEND] = send


def raw_socket(scope: Scope) -> RawSocket | None:
    """The socket under `scope`, when the server is the gateway's own WebSocket protocol
    (None on uvicorn's: its internals may differ from those this module reads)."""
    protocol = getattr(scope.get(RAW_SEND), "__self__", None)
    if isinstance(protocol, TickedKeepaliveProtocol):
        return RawSocket(protocol)
    return None
