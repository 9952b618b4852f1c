"""Fan-out of the live feed: one hub per process, one bounded queue per subscriber.

A slow subscriber is closed, never waited for, so that it slows neither the writers nor
the others; what a group of alike subscribers shares is computed once. The hub wires
parts of one verb each: `Roster` (who subscribes, by group), `FanOut` (offer each read),
`DirectSends` and `ArmedWrites` (serve waiting subscribers from the fan-out loop),
`Arming`, `TokenChecks`. The design (groups, the hub's direct sends, token checks):
docs/feed_hub.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from gql.feed.armed_writes import ArmedWrites
from gql.feed.arming import Arming
from gql.feed.batch import Batch, Direct, Progress, Rendered
from gql.feed.direct import DirectSends
from gql.feed.fan_out import FanOut
from gql.feed.options import Counts, FeedOptions
from gql.feed.outlet import FrameEncoder
from gql.feed.roster import Roster
from gql.feed.subscriber import Bearer, Closed, Item, Subscriber
from gql.feed.token_checks import TokenChecks
from gql.feed.turns import Turns
from store.errors import StoreError
from store.feed.filters import FeedFilter
from store.feed.live import FeedReader
from store.kinds.policy import in_force as policy_store
from store.kinds.policy.in_force import PolicyCache, PolicyVersion
from store.operations import tokens
from store.pool import Pool

# The feed's face to the rest of the gateway: what a subscription resolver and the
# server's lifespan use of the hub's parts.
__all__ = [
    "Batch",
    "Bearer",
    "Closed",
    "Direct",
    "FeedHub",
    "FeedOptions",
    "FeedStats",
    "FeedUnavailableError",
    "Item",
    "Progress",
    "Rendered",
    "Subscriber",
]


class FeedUnavailableError(StoreError):
    """The live feed has no database connection to start from."""

    def __init__(self) -> None:
        super().__init__(
            "the live feed cannot reach the database right now; subscribe again in a moment"
        )


@dataclass(frozen=True)
class FeedStats:
    """What the hub of one process is doing, for the metrics."""

    subscribers: int
    groups: int
    deliveries: int
    closed_slow: int
    lag_seconds: float


@dataclass
class FeedHub:
    """The process's one feed reader and its subscribers."""

    database_url: str
    engine: AsyncEngine
    pool: Pool
    policies: PolicyCache
    options: FeedOptions = field(default_factory=FeedOptions)
    frames: FrameEncoder | None = None
    """The server's frame encoding, for group writes (None: every message is sent the
    ordinary way, as with `FeedOptions.group_writes` off)."""
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    # When the read-side policy cache goes stale, the subscribers handed one batch all
    # ask for the policy at once; one reads it, the rest then find it cached.
    _policy_read: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        options = self.options
        frames = self.frames if options.group_writes else None
        self.counts = Counts()
        arming = Arming(group_writes=frames is not None)
        self.roster = Roster(arming, self.counts)
        turns = Turns(options.turn_seconds)
        self.fan_out = FanOut(
            self.roster,
            arming,
            ArmedWrites(arming, frames, self.counts, turns),
            DirectSends(frames, self.counts),
            self.counts,
            turns,
            self.pool,
            self.policy,
        )
        self.tokens = TokenChecks(
            self.engine, options.token_recheck_seconds, self.roster.subscribers, arming
        )
        self.reader = FeedReader(
            self.database_url,
            self.fan_out.hand_out,
            lambda: bool(self.roster.subscribers),
            poll_interval=options.poll_seconds,
            order_wait=options.order_wait_seconds,
            notices={tokens.REVOKED_CHANNEL: self.tokens.revoked},
            memberships_wanted=lambda: self.roster.gathering > 0,
        )

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self.reader.run(), name="edgeloom-feed"),
            asyncio.create_task(self.fan_out.run(), name="edgeloom-feed-fan-out"),
            asyncio.create_task(self.tokens.run(), name="edgeloom-feed-token-checks"),
        ]

    async def stop(self) -> None:
        for subscriber in list(self.roster.subscribers):
            self.roster.close(subscriber, Closed.STOPPING)
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def policy(self) -> PolicyVersion | None:
        """The policy in force for reads (`policy_store.current`), read once for a crowd."""
        async with self._policy_read:
            return await policy_store.current(self.pool, self.policies)

    async def token_agent(self, secret: str) -> str | None:
        """The agent of a live token, checked at most once per recheck interval for
        every subscription of the process (`TokenChecks.agent`)."""
        return await self.tokens.agent(secret)

    @asynccontextmanager
    async def subscribe(
        self,
        lanes: Sequence[str] | None,
        kinds: Sequence[str],
        share: Hashable | None = None,
        bearer: Bearer | None = None,
        wanted: FeedFilter | None = None,
    ) -> AsyncIterator[Subscriber]:
        """Register a subscriber for as long as the block runs.

        On entry the reader is live: every event it has not handed out yet will
        reach this subscriber's queue (if the filters match); so may some it handed
        out just before, visible to any snapshot taken after entry.
        """
        subscriber = Subscriber(
            lanes=None if lanes is None else frozenset(lanes),
            kinds=frozenset(kinds),
            queue=asyncio.Queue(maxsize=self.options.queue_batches),
            share=share,
            bearer=bearer,
            wanted=wanted or FeedFilter(),
        )
        self.roster.join(subscriber)
        try:
            self.reader.wake()
            if not await self.reader.live(self.options.start_timeout_seconds):
                raise FeedUnavailableError()
            yield subscriber
        finally:
            self.roster.leave(subscriber)
            subscriber.direct = None
            if subscriber.pending is not None:
                subscriber.pending.cancel()

    @property
    def _subscribers(self) -> set[Subscriber]:
        """Every subscriber now (`Roster.subscribers`), as the tests look at them."""
        return self.roster.subscribers

    @property
    def armed(self) -> int:
        """How many subscribers are armed now."""
        return self.roster.armed

    @property
    def sent_directly(self) -> int:
        return self.counts.sent_directly

    @property
    def group_writes(self) -> int:
        return self.counts.group_writes

    @property
    def armed_writes(self) -> int:
        return self.counts.armed_writes

    def stats(self) -> FeedStats:
        return FeedStats(
            subscribers=len(self.roster.subscribers),
            groups=len(self.roster.groups),
            deliveries=self.counts.deliveries,
            closed_slow=self.counts.closed_slow,
            lag_seconds=self.fan_out.lag_seconds,
        )
