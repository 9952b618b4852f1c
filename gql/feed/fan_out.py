"""Offering each read's events to the subscribers, reads in order: filtered once per
group, then written to armed sets, sent directly, or queued for each member's task."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from gql.feed.armed_writes import ArmedWrites
from gql.feed.arming import Arming
from gql.feed.batch import Batch, share_renderings
from gql.feed.carrying import Carrying
from gql.feed.direct import DirectSends
from gql.feed.options import Counts
from gql.feed.roster import Roster
from gql.feed.subscriber import Closed, Group, Subscriber
from gql.feed.turns import Turns
from store.feed.live import FeedEvent, with_memberships
from store.kinds.policy.in_force import PolicyVersion
from store.pool import Pool
from store.reads import lane_floor

log = logging.getLogger("edgeloom.feed")


class FanOut:
    """Hands what the reader read to every subscriber it concerns."""

    def __init__(
        self,
        roster: Roster,
        arming: Arming,
        armed_writes: ArmedWrites,
        direct: DirectSends,
        counts: Counts,
        turns: Turns,
        pool: Pool,
        policy: Callable[[], Awaitable[PolicyVersion | None]],
    ) -> None:
        self.roster = roster
        self.arming = arming
        self.armed_writes = armed_writes
        self.direct = direct
        self.counts = counts
        self.turns = turns
        self.pool = pool
        self.policy = policy
        # What the reader handed out, in order, not yet offered to every subscriber.
        self._pending: deque[Sequence[FeedEvent]] = deque()
        self._handed_out = asyncio.Event()
        # From the newest event's write to its hand-out by the reader, when it was handed out.
        self.lag_seconds = 0.0

    def hand_out(self, events: Sequence[FeedEvent]) -> None:
        """The reader's sink: the events are offered to the subscribers by `run`."""
        if events:
            written = events[-1].event.at
            self.lag_seconds = max(0.0, (datetime.now(written.tzinfo) - written).total_seconds())
        self._pending.append(events)
        self._handed_out.set()

    async def run(self) -> None:
        """Offer each read's events to every subscriber, reads in order.

        Serving hundreds back to back would hold up every request and query of the
        process for the lot: subscribers are served (sent to, or woken) in slices of
        `turn_seconds`, with a turn of the event loop between, so that other
        work goes on while an event spreads.
        """
        while True:
            await self._handed_out.wait()
            self._handed_out.clear()
            while self._pending:
                await self._offer(self._pending.popleft())

    async def _offer(self, events: Sequence[FeedEvent]) -> None:
        in_force = await self._version_in_force()
        if self.roster.gathering and any(e.held is None for e in events):
            events = await self._with_memberships(events)
        carrying = Carrying(events) if self.roster.gathering else None
        unheld = carrying is not None and any(e.held is None for e in events)
        # Filtered once per group, from one member: the members differ in nothing a
        # filter looks at.
        offers: list[tuple[Batch, Group]] = []
        for group in self.roster.offered(carrying, unheld):
            like = group.like
            if unheld and like.wanted.needs_memberships:
                # Their memberships could not be read: they resume from the table.
                for subscriber in self.roster.members(group):
                    self.roster.close(subscriber, Closed.TOO_SLOW)
                continue
            candidates = events if carrying is None else carrying.of(like.wanted)
            mine = tuple(e for e in candidates if like.wants(e))
            if mine:
                offers.append((Batch(mine, like.wanted, share=like.share), group))
        share_renderings(batch for batch, _ in offers)
        self.turns.begin()
        for batch, group in offers:
            await self._deliver(batch, group, in_force)

    async def _deliver(self, batch: Batch, group: Group, in_force: int | None) -> None:
        """Give `batch` to each member of `group`: one write to each of its armed sets,
        then to the rest one by one, written, sent or queued."""
        plain = list(group.plain)
        for armed in list(group.armed.values()):
            plain.extend(await self.armed_writes.write(armed, batch, in_force))
        for subscriber in plain:
            if subscriber not in self.roster.subscribers:
                continue  # gone, or closed, during an earlier turn
            if self.direct.write(subscriber, batch, in_force) or (
                await self.direct.send(subscriber, batch, in_force)
            ):
                self.arming.arm(group, subscriber, in_force)
            else:
                self._queue(subscriber, batch)
            self.counts.deliveries += 1
            await self.turns.served()

    def _queue(self, subscriber: Subscriber, batch: Batch) -> None:
        try:
            subscriber.queue.put_nowait(batch)
        except asyncio.QueueFull:
            self.roster.close(subscriber, Closed.TOO_SLOW)

    async def _with_memberships(self, events: Sequence[FeedEvent]) -> Sequence[FeedEvent]:
        """`events` with their records' memberships, for a gathering subscriber that came
        after the reader read them (the events as they were if the read fails)."""
        try:
            # Every subscriber's records: the gateway's own read, as the crossing role;
            # each subscriber is sent only what its lanes allow (readable_payload).
            async with self.pool.acquire() as conn, lane_floor.crossing(conn):
                return await with_memberships(conn, list(events))
        except Exception:
            log.warning("reading the feed's memberships failed", exc_info=True)
            return events

    async def _version_in_force(self) -> int | None:
        """The policy version in force (None: unknown now, so nothing is sent directly)."""
        try:
            in_force = await self.policy()
        except Exception:  # the subscribers' tasks read it again and report the failure
            return None
        return None if in_force is None else in_force.version
