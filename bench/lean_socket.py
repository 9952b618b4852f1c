"""A lean WebSocket client for the feed bench: an asyncio Protocol, no task per message.

The feed bench runs hundreds of subscribers on the same two cores as the gateways and
the writers it measures; whatever the subscribers spend is taken from the writers, and
a full client library spends several times what the gateway spends per delivery. This
client does only what the bench needs of RFC 6455: the opening handshake, unfragmented
text frames from the server (the gateway sends no others), masked text frames to it,
answering pings and closing. Each text message is handed to a callback as it arrives.
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Callable
from typing import Any

_TEXT, _CLOSE, _PING, _PONG = 0x1, 0x8, 0x9, 0xA


class LeanSocket(asyncio.Protocol):
    """One client connection; `on_text` gets each text message's bytes (UTF-8 JSON)."""

    def __init__(self, on_text: Callable[[bytes], None]) -> None:
        self.on_text = on_text
        # uvloop's transports are alike to asyncio.Transport, not subclasses of it.
        self.transport: Any = None
        self._buffer = bytearray()
        self._open = False
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    @classmethod
    async def connect(
        cls, url: str, subprotocol: str, on_text: Callable[[bytes], None]
    ) -> LeanSocket:
        """Open `ws://host:port/path` and finish the handshake."""
        rest = url.removeprefix("ws://")
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.partition(":")
        loop = asyncio.get_running_loop()
        _, socket = await loop.create_connection(lambda: cls(on_text), host, int(port or 80))
        assert socket.transport is not None
        key = base64.b64encode(os.urandom(16)).decode()
        socket.transport.write(
            (
                f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {subprotocol}\r\n\r\n"
            ).encode()
        )
        await socket.opened
        return socket

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_exception(ConnectionError("closed during the opening handshake"))
        if not self.closed.done():
            self.closed.set_result(None)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if not self._open:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buffer[:end])
            del self._buffer[: end + 4]
            if not head.startswith(b"HTTP/1.1 101"):
                self.opened.set_exception(ConnectionError(head.decode(errors="replace")))
                self.close()
                return
            self._open = True
            self.opened.set_result(None)
        self._frames()

    def _frames(self) -> None:
        buffer = self._buffer
        at, size = 0, len(buffer)
        while size - at >= 2:
            first, second = buffer[at], buffer[at + 1]
            length, head = second & 0x7F, 2
            if length == 126:
                if size - at < 4:
                    break
                length, head = int.from_bytes(buffer[at + 2 : at + 4], "big"), 4
            elif length == 127:
                if size - at < 10:
                    break
                length, head = int.from_bytes(buffer[at + 2 : at + 10], "big"), 10
            if size - at < head + length:
                break
            payload = bytes(buffer[at + head : at + head + length])
            at += head + length
            if not first & 0x80:
                raise ValueError("fragmented frames are not expected from the gateway")
            opcode = first & 0x0F
            if opcode == _TEXT:
                self.on_text(payload)
            elif opcode == _PING:
                self._send(_PONG, payload)
            elif opcode == _CLOSE:
                self.close()
        del buffer[:at]

    def send_text(self, text: str) -> None:
        self._send(_TEXT, text.encode())

    def _send(self, opcode: int, payload: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        size = len(payload)
        if size < 126:
            head = bytes([0x80 | opcode, 0x80 | size])
        elif size < 1 << 16:
            head = bytes([0x80 | opcode, 0x80 | 126]) + size.to_bytes(2, "big")
        else:
            head = bytes([0x80 | opcode, 0x80 | 127]) + size.to_bytes(8, "big")
        mask = os.urandom(4)
        # XOR with the mask repeated over the payload, as one big-integer operation.
        repeated = (mask * (size // 4 + 1))[:size]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(
            size, "big"
        )
        self.transport.write(head + mask + masked)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._send(_CLOSE, (1000).to_bytes(2, "big"))
            self.transport.close()
