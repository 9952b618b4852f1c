"""The live feed: reading `audit_events` by transaction visibility (its replay:
`store.feed.replay`).

Events become visible when their transaction commits, not in `seq` order, so the
reader asks for what its last snapshot could not see (`txid = ANY(xip) OR txid >=
xmax`) instead of "seq above the last one": every committed event exactly once, in seq
order but for a bounded wait at a gap, with bounded memory. docs/feed.md gives the
reasoning, the guarantees and the replay's seam with the live feed.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import asyncpg

from store.feed import filters
from store.feed.polls import SNAPSHOT, UNSEEN, poll_statement
from store.ledger.audit import AuditEvent
from store.pool import json_codecs, plain_url
from store.reads import lane_floor
from store.reads.snapshot import Reader
from store.reads.visibility import (
    NOTHING_NAMED,
    Named,
    read_named,
    readable_payload,
)

log = logging.getLogger("edgeloom.feed")

APPLICATION_NAME = "edgeloom-feed"
"""The reader's connection calls itself this, so operators (and tests) can find it."""


_XID_SPAN = 1 << 32


def widen_xid(xid: int, xmax: int) -> int:
    """A 32-bit transaction id as the full (xid8) id nearest a snapshot's xmax."""
    ahead = (xid - xmax) % _XID_SPAN
    return xmax + (ahead if ahead < _XID_SPAN // 2 else ahead - _XID_SPAN)


@dataclass(frozen=True)
class Snapshot:
    """Which transactions a PostgreSQL snapshot counts as finished.

    `late` is what PostgreSQL's own snapshot leaves out: transactions running when
    it was taken whose ids are at or above its xmax (known only to the reader).
    """

    xmin: int
    xmax: int
    xip: frozenset[int]
    late: frozenset[int] = frozenset()

    @classmethod
    def from_row(cls, row: Any) -> Snapshot:
        xmax: int = row["xmax"]
        widened = (widen_xid(x, xmax) for x in row["xids"])
        return cls(
            row["xmin"], xmax, frozenset(row["xip"]), frozenset(x for x in widened if x >= xmax)
        )

    @property
    def running(self) -> frozenset[int]:
        """Every transaction that was running when the snapshot was taken."""
        return self.xip | self.late

    def finished(self, txid: int) -> bool:
        """Whether a transaction had ended when this snapshot was taken: if it
        committed, its rows are visible in the snapshot."""
        return txid < self.xmax and txid not in self.xip

    def as_text(self) -> str:
        """The `pg_snapshot` text form, for `pg_visible_in_snapshot`."""
        return f"{self.xmin}:{self.xmax}:{','.join(map(str, sorted(self.xip)))}"

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))


@dataclass(frozen=True)
class FeedEvent:
    """An audit event with the transaction that wrote it, and the lanes of the records its
    payload names (read with it, so each set of readers' payloads is made without I/O)."""

    event: AuditEvent
    txid: int
    named: Named = NOTHING_NAMED
    # Every membership of its record (`filters.memberships`), read with it while some
    # subscriber filters on a gather; None: not read.
    held: filters.Carried | None = None

    @property
    def seq(self) -> int:
        return self.event.seq

    @functools.cached_property
    def cursor(self) -> str:
        """The event's position as its subscribers see it (made once, sent to many)."""
        return str(self.event.seq)

    @classmethod
    def from_row(cls, row: Any) -> FeedEvent:
        return cls(AuditEvent.from_row(row), row["txid"])

    def for_reader(self, readable: frozenset[str]) -> FeedEvent:
        """The event as a reader of the lanes `readable` may see it (`store.reads.visibility`)."""
        seen = readable_payload(self.event, readable, self.named)
        return self if seen is self.event else replace(self, event=seen)


async def with_named(db: Reader, events: list[FeedEvent]) -> list[FeedEvent]:
    """`events` with the lanes their payloads name (no statement when they name none)."""
    named = await read_named(db, [e.event for e in events])
    if named is NOTHING_NAMED:
        return events
    return [replace(e, named=named) for e in events]


async def with_memberships(db: Reader, events: list[FeedEvent]) -> list[FeedEvent]:
    """`events` with the memberships of their records (one statement)."""
    found = await filters.memberships(db, [e.event for e in events])
    return [
        replace(e, held=filters.Carried.of(e.event, found.get(e.event.record_id or "", ())))
        for e in events
    ]


Sink = Callable[[Sequence[FeedEvent]], None]
Notice = Callable[[str | None], None]
"""Called with a notification's payload, or with None when the reader (re)connected, so
that whatever was notified while no connection listened may be looked up afresh."""


@dataclass
class Orderer:
    """Releases events in seq order, waiting a bounded time for the seqs in between.

    Pure bookkeeping (no I/O), so the ordering rule is tested on its own.
    """

    released_upto: int
    order_wait: float
    pending: dict[int, FeedEvent] = field(default_factory=dict)
    _heap: list[int] = field(default_factory=list)
    _gap_blockers: frozenset[int] | None = None
    _gap_since: float = 0.0

    def release(
        self, events: Iterable[FeedEvent], snapshot: Snapshot, now: float
    ) -> list[FeedEvent]:
        """Take the events newly visible in `snapshot`; return those that may go out
        now, in order.

        Only a transaction running when a gap is first seen can still fill it.
        """
        out: list[FeedEvent] = []
        for event in events:
            if event.seq <= self.released_upto:
                # Its gap was passed (or it predates the reader): late, not lost.
                out.append(event)
            elif event.seq not in self.pending:
                self.pending[event.seq] = event
                heapq.heappush(self._heap, event.seq)
        while self._heap:
            lowest = self._heap[0]
            if lowest != self.released_upto + 1 and not self._gap_passed(snapshot, now):
                break
            heapq.heappop(self._heap)
            out.append(self.pending.pop(lowest))
            self.released_upto = lowest
            self._gap_blockers = None
        return out

    def _gap_passed(self, snapshot: Snapshot, now: float) -> bool:
        if self._gap_blockers is None:
            # First sight of this gap: only the transactions running now can fill it.
            self._gap_blockers = snapshot.running
            self._gap_since = now
        # Ended as of the snapshot the events were read under, so a blocker that
        # committed is read together with the check, never after it.
        if all(snapshot.finished(txid) for txid in self._gap_blockers):
            return True
        return now - self._gap_since >= self.order_wait


class FeedReader:
    """Reads new audit events on one dedicated connection and hands them to a sink.

    Polls every `poll_interval` seconds while `wanted()` is true and not at all
    otherwise; reconnects with backoff when the connection is lost.
    """

    def __init__(
        self,
        database_url: str,
        sink: Sink,
        wanted: Callable[[], bool],
        *,
        poll_interval: float = 0.05,
        order_wait: float = 1.0,
        fetch_size: int = 500,
        max_backoff: float = 5.0,
        notices: Mapping[str, Notice] | None = None,
        memberships_wanted: Callable[[], bool] = lambda: False,
    ) -> None:
        self.database_url = plain_url(database_url)
        self.sink = sink
        self.wanted = wanted
        self.memberships_wanted = memberships_wanted
        # Channels LISTENed on the reader's own connection (rare notifications only:
        # the events themselves are polled, keeping NOTIFY off the write path).
        self.notices = dict(notices or {})
        self.poll_interval = poll_interval
        self.order_wait = order_wait
        self.fetch_size = fetch_size
        self._poll_statement = poll_statement(fetch_size)
        self.max_backoff = max_backoff
        self.reconnects = 0
        self._wake = asyncio.Event()
        self._live = asyncio.Event()
        self._snapshot: Snapshot | None = None
        self._orderer: Orderer | None = None
        # Seqs released by a read that has not completed; a repeat skips them.
        self._partial: set[int] = set()

    def wake(self) -> None:
        """Subscribers exist: start polling (after taking a starting point)."""
        self._wake.set()

    async def live(self, timeout: float) -> bool:
        """Wait until the reader has a starting point; false if it has none in time."""
        try:
            await asyncio.wait_for(self._live.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def run(self) -> None:
        """The reader's loop; runs until cancelled."""
        backoff = 0.05
        while True:
            await self._wake.wait()
            conn: asyncpg.Connection | None = None
            try:
                conn = await self._connect()
                backoff = 0.05
                await self._poll(conn)
            except asyncio.CancelledError:
                raise
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                self.reconnects += 1
                log.warning("feed connection lost (%s); reconnecting in %.2fs", exc, backoff)
            except Exception:
                self.reconnects += 1
                log.exception("feed reader failed; restarting in %.2fs", backoff)
            finally:
                if conn is not None:
                    conn.terminate()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)

    async def _connect(self) -> asyncpg.Connection:
        # Never a pooled connection: a pool resets session state and may hand the
        # connection to a writer; the feed's connection is its own for its lifetime.
        conn: asyncpg.Connection = await asyncpg.connect(
            self.database_url,
            server_settings={
                "application_name": APPLICATION_NAME,
                # A read returns what committed since the last one: starting parallel
                # workers for it costs more than the read.
                "max_parallel_workers_per_gather": "0",
                # The poll is planned once (see poll_statement), not at every poll.
                "plan_cache_mode": "force_generic_plan",
            },
        )
        await json_codecs(conn)
        if lane_floor.login_role(conn) == lane_floor.RUNTIME_ROLE:
            # It reads every lane's events for every subscriber: the crossing role, on
            # this connection of its own for its lifetime.
            await conn.execute(f"SET ROLE {lane_floor.CROSSING_ROLE}")
        for channel, notice in self.notices.items():
            await conn.add_listener(channel, _listener(notice))
            notice(None)
        return conn

    async def _poll(self, conn: asyncpg.Connection) -> None:
        while True:
            if not self.wanted():
                # No one listens: forget the position, so that the next subscriber
                # starts from its own present rather than from a stale past.
                self._live.clear()
                self._wake.clear()
                self._snapshot = None
                self._orderer = None
                self._partial.clear()
                await self._wake.wait()
                continue
            if self._snapshot is None:
                await self._start(conn)
            else:
                await self._read(conn)
            await asyncio.sleep(self.poll_interval)

    async def _start(self, conn: asyncpg.Connection) -> None:
        row = await conn.fetchrow(SNAPSHOT)
        assert row is not None
        self._snapshot = Snapshot.from_row(row)
        self._orderer = Orderer(released_upto=row["newest"], order_wait=self.order_wait)
        self._live.set()

    async def _read(self, conn: asyncpg.Connection) -> None:
        assert self._snapshot is not None and self._orderer is not None
        previous = self._snapshot
        unseen = (str(previous.xmax), [str(x) for x in previous.xip])
        rows = await conn.fetch(self._poll_statement, *unseen)
        events = [r for r in rows if r["seq"] is not None]
        if len(events) < self.fetch_size:
            current = Snapshot.from_row(rows[0])
            fresh = [FeedEvent.from_row(r) for r in events if r["seq"] not in self._partial]
            # Read before the snapshot moves on: a failed read is repeated whole.
            fresh = await self._with_context(conn, fresh)
            self._snapshot = current
            self._hand_out(self._orderer.release(fresh, current, time.monotonic()))
            self._partial.clear()
            return
        await self._read_many(conn, previous)

    async def _read_many(self, conn: asyncpg.Connection, previous: Snapshot) -> None:
        """A read of any size (a catch-up), streamed under one snapshot."""
        assert self._orderer is not None
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            # A catch-up of any size has no limit for a generic plan to stop at.
            await conn.execute("SET LOCAL plan_cache_mode = auto")
            row = await conn.fetchrow(SNAPSHOT)
            assert row is not None
            current = Snapshot.from_row(row)
            cursor = await conn.cursor(UNSEEN, str(previous.xmax), [str(x) for x in previous.xip])
            while True:
                rows = await cursor.fetch(self.fetch_size)
                if not rows:
                    break
                fresh = [FeedEvent.from_row(r) for r in rows if r["seq"] not in self._partial]
                fresh = await self._with_context(conn, fresh)
                self._hand_out(self._orderer.release(fresh, current, time.monotonic()))
        # Rows of this read are now behind the snapshot; the next read cannot return them.
        self._snapshot = current
        self._hand_out(self._orderer.release((), current, time.monotonic()))
        self._partial.clear()

    async def _with_context(
        self, conn: asyncpg.Connection, events: list[FeedEvent]
    ) -> list[FeedEvent]:
        """What subscribers decide on beside the events: the lanes their payloads name,
        and while some subscriber filters on a gather, their records' memberships."""
        events = await with_named(conn, events)
        if events and self.memberships_wanted():
            events = await with_memberships(conn, events)
        return events

    def _hand_out(self, events: list[FeedEvent]) -> None:
        if not events:
            return
        self._partial.update(e.seq for e in events)
        try:
            self.sink(events)
        except Exception:
            # The sink is in-process fan-out; its failure must not stop the feed.
            log.exception("feed sink failed")


def _listener(notice: Notice) -> Callable[[object, int, str, object], None]:
    def notified(_conn: object, _pid: int, _channel: str, payload: object) -> None:
        notice(str(payload))

    return notified
