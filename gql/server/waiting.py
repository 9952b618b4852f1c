"""Connections waiting for a request's headers, or for its body: bounded in time, in size
and in number.

uvicorn bounds none of them on its httptools protocol (its `h11_max_incomplete_event_size`
is h11's alone, and it has no header timeout): a connection that never finishes its
headers, or opens and sends nothing, holds a descriptor and needs no token, so a few
thousand of them leave the process none to accept anyone else with. Here a connection
counts as waiting from its opening, and again from the end of each response while it is
kept alive, until its next request's headers are complete. One that waits longer than
the header timeout is closed; so is the oldest one waiting when a new connection would
pass the cap. A client that sends its headers at once is never the oldest, so however
many connections stall, the others are answered. Headers over `MAX_HEADER_BYTES` are
refused with 431.

A request whose headers are complete may still hold its connection by never sending the
body it announced (the app waits to read it, or has answered and the body's rest is still
due). Such connections wait too, in a `Waiting` of their own (`BODIES`) with its own time
(`Settings.body_timeout`, from the read that completed the headers to the body's end) and
cap (half the headers' cap): one past either is answered 408 unless its response began,
and closed. A body that arrives with its headers never waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Protocol

from gql.server.descriptors import HTTP_HEADROOM, LOG_EVERY_SECONDS

log = logging.getLogger("edgeloom.sockets")

DEFAULT_HEADER_TIMEOUT = 10.0
MAX_HEADER_BYTES = 64 * 1024
# The most connections one process lets wait, and at most half the descriptors the
# WebSocket caps keep out for HTTP (gql.server.descriptors): the other half is the database's and
# the requests' being answered.
MAX_WAITING = 512
STATE_KEY = "edgeloom.waiting"
# Bodies may be 8 MiB: this takes one in about 2 Mbit/s.
DEFAULT_BODY_TIMEOUT = 30.0
BODIES = "edgeloom.waiting.bodies"


def waiting_cap(open_files: int) -> int:
    """How many connections may wait at once under the open-file limit `open_files`."""
    return max(1, min(MAX_WAITING, min(HTTP_HEADROOM, open_files // 4) // 2))


def body_waiting_cap(open_files: int) -> int:
    """How many connections may wait for their request's body at once: half as many as
    for headers, so that both together keep a quarter of the HTTP descriptors free."""
    return max(1, waiting_cap(open_files) // 2)


class Waiter(Protocol):
    """A connection that can be told to stop waiting: it closes."""

    def give_up(self) -> None: ...


class Waiting:
    """The process's waiting connections, oldest first, on one timer."""

    def __init__(
        self, cap: int, timeout: float = DEFAULT_HEADER_TIMEOUT, what: str = "request headers"
    ) -> None:
        self.cap = cap
        self.timeout = timeout
        self.what = what  # what they wait for, in the log
        # Insertion order is waiting order: a connection that waits again goes last.
        self._since: dict[Waiter, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._logged = -LOG_EVERY_SECONDS

    def __len__(self) -> int:
        return len(self._since)

    def start(self, waiter: Waiter) -> None:
        """`waiter` waits for a request's headers from now on."""
        self._since.pop(waiter, None)
        while len(self._since) >= self.cap:
            oldest = next(iter(self._since))
            del self._since[oldest]
            self._note_full()
            oldest.give_up()
        self._since[waiter] = time.monotonic()
        if self._timer is None:
            self._arm()

    def stop(self, waiter: Waiter) -> None:
        """`waiter` has its headers, or is gone."""
        self._since.pop(waiter, None)

    def _arm(self) -> None:
        delay = min(1.0, self.timeout / 2)
        self._timer = asyncio.get_running_loop().call_later(delay, self._expire)

    def _expire(self) -> None:
        self._timer = None
        cutoff = time.monotonic() - self.timeout
        for waiter, since in list(self._since.items()):
            if since > cutoff:
                break
            del self._since[waiter]
            waiter.give_up()
        if self._since:
            self._arm()

    def _note_full(self) -> None:
        now = time.monotonic()
        if now - self._logged >= LOG_EVERY_SECONDS:
            self._logged = now
            log.warning(
                "%d connections are waiting for their %s, the most one process lets wait: "
                "the oldest are closed (logged once per %gs)",
                self.cap,
                self.what,
                LOG_EVERY_SECONDS,
            )


def waiting_of(state: Mapping[str, object], key: str = STATE_KEY) -> Waiting | None:
    """The app's `Waiting` for headers (or for bodies: `key` BODIES), from the lifespan
    state uvicorn hands each connection."""
    found = state.get(key)
    return found if isinstance(found, Waiting) else None
