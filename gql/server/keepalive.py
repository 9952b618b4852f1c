"""WebSocket keepalive pings on one timer per event loop instead of two per connection.

uvicorn's websockets-sansio protocol gives every connection its own timers: the next
ping (every `ws_ping_interval`, 20 s) and, once it is sent, the pong's deadline
(`ws_ping_timeout`). With ten thousand subscribers that is 500 pings a second, each a
timer set and cancelled in a heap of twenty thousand and a wake-up of its own, which on
an idle gateway cost more than the pings' writes. Here every deadline is rounded up to
the next whole `TICK` and kept in that tick's bucket: one timer per loop fires once a
tick while anything is due, and sends that tick's pings and closes its silent
connections together. A ping goes out up to one tick later than it would have (or up to
`SLACK` sooner), and so is a dead peer found; nothing else changes.
"""

from __future__ import annotations

import asyncio
import math
import random
import struct
from collections.abc import Callable
from typing import Any, cast
from weakref import WeakKeyDictionary

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

TICK = 1.0
"""Seconds: the keepalive deadlines' granularity."""

SLACK = 0.01
"""Seconds: a time this close to a tick counts as at it. The timer fires a little before
or after its tick, and a ping's next deadline is reckoned from when it was sent: rounded
up as it is, it would land a whole tick late whenever the timer had fired late."""


class Deadline:
    """One callback due at a tick; cancelled like a timer handle."""

    __slots__ = ("_ticks", "_tick", "callback", "cancelled")

    def __init__(self, ticks: Ticks, tick: int, callback: Callable[[], None]) -> None:
        self._ticks, self._tick, self.callback = ticks, tick, callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True  # also when its tick is being fired
        self._ticks.cancel(self._tick, self)


class Ticks:
    """The deadlines of one event loop, by tick, on one timer."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._due: dict[int, dict[Deadline, None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for = 0  # the tick the timer fires at, while there is one

    def __len__(self) -> int:
        return sum(map(len, self._due.values()))

    def call_later(self, delay: float, callback: Callable[[], None]) -> Deadline:
        """Call `callback` at the first tick at least `delay` seconds from now (less `SLACK`)."""
        tick = math.ceil((self._loop.time() + delay - SLACK) / TICK)
        deadline = Deadline(self, tick, callback)
        self._due.setdefault(tick, {})[deadline] = None
        if self._timer is None or tick < self._armed_for:
            # A pong's deadline may be due before every ping held: move the timer up.
            self._arm()
        return deadline

    def cancel(self, tick: int, deadline: Deadline) -> None:
        bucket = self._due.get(tick)
        if bucket is not None:
            bucket.pop(deadline, None)
            if not bucket:
                del self._due[tick]

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = min(self._due)
        self._timer = self._loop.call_at(self._armed_for * TICK, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = math.floor((self._loop.time() + SLACK) / TICK)
        for tick in sorted(t for t in self._due if t <= now):
            for deadline in self._due.pop(tick):
                if deadline.cancelled:
                    continue
                try:
                    deadline.callback()  # what it adds is due at a later firing
                except Exception as exc:  # one connection's failure stops no other's pings
                    self._loop.call_exception_handler(
                        {"message": "a keepalive deadline failed", "exception": exc}
                    )
        if self._due:
            self._arm()


_ticks: WeakKeyDictionary[asyncio.AbstractEventLoop, Ticks] = WeakKeyDictionary()


def ticks(loop: asyncio.AbstractEventLoop) -> Ticks:
    """The keepalive deadlines of `loop`."""
    found = _ticks.get(loop)
    if found is None:
        found = _ticks[loop] = Ticks(loop)
    return found


class TickedKeepaliveProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websockets-sansio protocol with its keepalive deadlines on `Ticks`."""

    def schedule_ping(self) -> None:
        assert self.ping_interval is not None
        delay = max(0.0, self.ping_interval - self.last_ping_rtt)
        self.ping_timer = _as_timer(ticks(self.loop).call_later(delay, self.send_keepalive_ping))

    def send_keepalive_ping(self) -> None:
        # uvicorn's, with the pong's deadline on the ticks: a connection that is quiet
        # for `ws_ping_timeout` after a ping is failed with 1011.
        self.ping_timer = None
        if self.close_sent or self.transport.is_closing():
            return
        self.pending_ping_payload = struct.pack("!I", random.getrandbits(32))
        self.ping_sent_at = self.loop.time()
        self.conn.send_ping(self.pending_ping_payload)
        self.transport.write(b"".join(self.conn.data_to_send()))
        if self.ping_timeout is not None:
            deadline = ticks(self.loop).call_later(self.ping_timeout, self.keepalive_timeout)
            self.pong_timer = _as_timer(deadline)
        else:
            self.schedule_ping()


def _as_timer(deadline: Deadline) -> asyncio.TimerHandle:
    """`deadline` where uvicorn keeps a timer handle: it only ever cancels it."""
    return cast(asyncio.TimerHandle, cast(Any, deadline))
