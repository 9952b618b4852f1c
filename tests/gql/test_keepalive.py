"""Keepalive pings on one timer per event loop (gql/server/keepalive.py), over real sockets to a
real uvicorn server with the options `edgeloom serve` runs."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gql.server.keepalive import TICK, Deadline, Ticks, ticks
from tests.support import server_thread

INTERVAL = 1.0  # seconds between pings, and to answer one
OP_CLOSE, OP_PING, OP_PONG = 0x8, 0x9, 0xA


@dataclass
class Served:
    port: int
    loop: asyncio.AbstractEventLoop


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Accepts a WebSocket and holds it until the client goes."""
    if scope["type"] != "websocket":
        return
    await receive()
    await send({"type": "websocket.accept"})
    while (await receive())["type"] != "websocket.disconnect":
        pass


@pytest.fixture
def served() -> Iterator[Served]:
    loops: list[asyncio.AbstractEventLoop] = []

    async def remember_loop(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not loops:
            loops.append(asyncio.get_running_loop())
        await app(scope, receive, send)

    options = {"lifespan": "off", "ws_ping_interval": INTERVAL, "ws_ping_timeout": INTERVAL}
    with server_thread(remember_loop, **options) as port:
        with Client(port):  # the app sees the server's loop
            while not loops:
                time.sleep(0.01)
        yield Served(port, loops[0])


class Client:
    """A WebSocket client on a plain socket: it answers pings only when told to."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        assert chunk, "the server closed the connection"
        return chunk

    def read_frame(self) -> tuple[int, bytes]:
        """The next frame from the server (unmasked, short): its opcode and payload."""
        while len(self.buffer) < 2 or len(self.buffer) < 2 + (self.buffer[1] & 0x7F):
            self.buffer += self._recv()
        size = self.buffer[1] & 0x7F
        assert size < 126, "a long frame: not expected here"
        opcode, payload = self.buffer[0] & 0x0F, self.buffer[2 : 2 + size]
        self.buffer = self.buffer[2 + size :]
        return opcode, payload

    def pong(self, payload: bytes) -> None:
        mask = os.urandom(4)
        masked = bytes(b ^ mask[n % 4] for n, b in enumerate(payload))
        self.sock.sendall(bytes([0x80 | OP_PONG, 0x80 | len(payload)]) + mask + masked)


def deadlines(served: Served) -> int:
    """The keepalive deadlines held on the server's loop, read on that loop."""

    async def count() -> int:
        return len(ticks(asyncio.get_running_loop()))

    return asyncio.run_coroutine_threadsafe(count(), served.loop).result(5)


def bursts(times: list[float]) -> list[list[float]]:
    """`times` in runs, each apart from the one before by more than half a tick."""
    runs: list[list[float]] = []
    for at in sorted(times):
        if runs and at - runs[-1][-1] < TICK / 2:
            runs[-1].append(at)
        else:
            runs.append([at])
    return runs


def test_pings_of_connections_opened_apart_go_out_together_each_tick(served: Served) -> None:
    """Connections opened over most of a tick are pinged at the same tick, and again a
    tick apart while they answer: one timer serves them all."""
    clients = []
    try:
        for _ in range(12):
            clients.append(Client(served.port))
            time.sleep(0.6 * TICK / 12)
        for round_ in range(2):
            arrivals = []
            for client in clients:
                opcode, payload = client.read_frame()
                arrivals.append(time.monotonic())
                assert opcode == OP_PING, (round_, opcode)
                client.pong(payload)
            # At one tick, or two when the openings straddled one; uvicorn's own timers
            # would ping them 0.05 s apart, in the order they opened.
            runs = bursts(arrivals)
            assert len(runs) <= 2, (round_, arrivals)
            assert all(run[-1] - run[0] < TICK / 5 for run in runs), (round_, arrivals)
        assert deadlines(served) == len(clients)  # each one's next ping
    finally:
        for client in clients:
            client.sock.close()
    deadline = time.monotonic() + 5
    while deadlines(served):  # a closed connection's deadline goes with it
        assert time.monotonic() < deadline, deadlines(served)
        time.sleep(0.05)


def test_a_peer_that_never_answers_a_ping_is_closed_with_1011(served: Served) -> None:
    with Client(served.port) as client:
        opcode, _ = client.read_frame()
        assert opcode == OP_PING
        pinged = time.monotonic()
        opcode, payload = client.read_frame()  # not answered: the pong's deadline passes
        assert opcode == OP_CLOSE
        assert struct.unpack("!H", payload[:2])[0] == 1011
        assert payload[2:] == b"keepalive ping timeout"
        assert INTERVAL - 0.1 < time.monotonic() - pinged < INTERVAL + 2 * TICK


async def test_a_failing_deadline_stops_no_other() -> None:
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    ran: list[str] = []

    def fail() -> None:
        raise OSError("gone")

    # Its own, not the loop's: the suite's other gateways on this loop hold theirs.
    due = Ticks(loop)
    due.call_later(0, lambda: ran.append("before"))
    due.call_later(0, fail)
    due.call_later(0, lambda: ran.append("after"))
    due.call_later(TICK, lambda: ran.append("next tick"))
    due.call_later(TICK, lambda: ran.append("cancelled")).cancel()
    victim: list[Deadline] = []  # cancelled by the one before it, at the same tick
    due.call_later(TICK, lambda: victim[0].cancel())
    victim.append(due.call_later(TICK, lambda: ran.append("cancelled while its tick fires")))
    async with asyncio.timeout(3 * TICK):
        while len(ran) < 3:
            await asyncio.sleep(0.05)
    assert ran == ["before", "after", "next tick"]
    assert [type(e["exception"]) for e in errors] == [OSError]
    assert len(due) == 0


async def test_a_deadline_sooner_than_every_other_is_not_held_back_by_them() -> None:
    """A pong's deadline (`ws_ping_timeout`) may be due before every ping held: the one
    timer is moved up to it rather than left at the later tick."""
    loop = asyncio.get_running_loop()
    due = Ticks(loop)
    ran: list[tuple[str, float]] = []
    started = loop.time()
    later = due.call_later(4 * TICK, lambda: ran.append(("later", loop.time())))
    due.call_later(0, lambda: ran.append(("sooner", loop.time())))
    async with asyncio.timeout(3 * TICK):
        while not ran:
            await asyncio.sleep(0.05)
    assert [name for name, _ in ran] == ["sooner"]
    assert ran[0][1] - started < 1.5 * TICK
    later.cancel()
    assert len(due) == 0
