"""Fan-out of the live feed: one hub per process, one bounded queue per subscriber.

A slow subscriber is closed, never waited for, so that it slows neither the writers nor
the others; what a group of alike subscribers shares is computed once. The design (groups,
the hub's direct sends, token checks): docs/feed_hub.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import logging
import time
from collections import deque
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from gql.feed.eager import run_eagerly
from gql.feed.outlet import FrameEncoder, SocketOutlet
from policies.properties import Property
from store.errors import StoreError
from store.feed.filters import NOTHING_CARRIED, FeedFilter
from store.feed.live import FeedEvent, FeedReader, Snapshot, with_memberships
from store.kinds.policy import in_force as policy_store
from store.kinds.policy.in_force import PolicyCache, PolicyVersion
from store.operations import tokens
from store.pool import Pool
from store.reads.visibility import RULE

log = logging.getLogger("edgeloom.feed")


class Closed(enum.Enum):
    """Why a subscription's queue was closed by the hub."""

    TOO_SLOW = "too slow"
    STOPPING = "stopping"


@dataclass(frozen=True)
class FeedOptions:
    """How the feed of one gateway process runs."""

    poll_seconds: float = 0.05
    order_wait_seconds: float = 1.0
    # Batches (one per read that has events for the subscriber), not events: a
    # subscriber this far behind is closed and resumes from its last cursor.
    queue_batches: int = 256
    start_timeout_seconds: float = 10.0
    token_recheck_seconds: float = 2.0
    # Render each event once per group of subscribers running the same operation under
    # the same rights, and send them all the same message. Off, every subscriber's
    # events are executed on their own: the reference the shared rendering is held to.
    share_renderings: bool = True
    # How long the fan-out serves subscribers (sends to or wakes them) before it lets
    # the event loop turn, when an event reaches many, so that requests go on while it
    # spreads: a thousandth of a second delays a request no more than that, and costs a
    # turn of the loop per few dozen deliveries, not one per sixteen.
    turn_seconds: float = 0.001
    # Write a group's messages to each member's socket as frames built once per group,
    # from the fan-out loop (the server's frame encoding, handed to the hub at start). Off,
    # each message goes through the socket's ordinary send: the reference the group write
    # is held to.
    group_writes: bool = True


class FeedUnavailableError(StoreError):
    """The live feed has no database connection to start from."""

    def __init__(self) -> None:
        super().__init__(
            "the live feed cannot reach the database right now; subscribe again in a moment"
        )


Rendered = Mapping[int, str | None]
"""Pre-encoded message payloads by event seq; None where an event must be executed alone."""


@dataclass(frozen=True, slots=True)
class Sending:
    """The frames of the messages a member of a group is due, ready to write."""

    frames: bytes
    cursor: str | None
    """The cursor of the last of them."""
    count: int


NOTHING = Sending(b"", None, 0)
"""Nothing due."""


@dataclass(eq=False)
class Batch:
    """The events of one read that a group of subscribers wants, in feed order.

    Every subscriber of the group gets this same object, so what they derive from it
    under equal rights is derived once (`rendered`).
    """

    events: tuple[FeedEvent, ...]
    # The group's filter on records: an event is wanted for what its reader can see of
    # it, so one whose payload names the given records only in names hidden from the
    # reader is not.
    wanted: FeedFilter = field(default_factory=FeedFilter)
    # The operation its subscribers run (None: they share nothing), and the batch of every
    # event of the read that a group running it wants: groups that differ only in the
    # records they follow render from it, once per read (None: from this one).
    share: Hashable | None = None
    source: Batch | None = None
    _renders: dict[Hashable, asyncio.Task[Rendered]] = field(default_factory=dict)
    _allowed: dict[frozenset[str], list[FeedEvent]] = field(default_factory=dict)
    _frames: dict[Hashable, Sending] = field(default_factory=dict)
    _whole: dict[Hashable, Sending] = field(default_factory=dict)
    # The lowest seq and transaction id among the events: a subscriber whose replay
    # ended below both has none of them behind it (`Progress.due`).
    lowest_seq: int = field(init=False)
    lowest_txid: int = field(init=False)

    def __post_init__(self) -> None:
        self.lowest_seq = min((e.seq for e in self.events), default=0)
        self.lowest_txid = min((e.txid for e in self.events), default=0)

    def allowed(self, readable: frozenset[str]) -> list[FeedEvent]:
        """The events whose lane `readable` covers (lane-less ones concern every lane),
        their payloads as a reader of `readable` may see them, worked out once per set
        of lanes for the whole group."""
        found = self._allowed.get(readable)
        if found is None:
            found = [
                e.for_reader(readable)
                for e in self.events
                if RULE.may_read_event(e.event.lane, readable, e.event.payload)
            ]
            if self.wanted.record_ids is not None:
                found = [e for e in found if self.wanted.names(e.event)]
            self._allowed[readable] = found
        return found

    async def rendered(
        self, rights: Hashable, render: Callable[[], Coroutine[Any, Any, Rendered]]
    ) -> Rendered:
        """The rendering for `rights`, made by the first caller; later callers wait for it.

        It runs as a task of its own, so a subscriber that leaves while it runs does not
        cancel it for the others; `render` must not raise (it answers "not shared"
        instead), since no one may be left to retrieve the error.
        """
        done = self.ready(rights)
        if done is not None:
            return done  # the common case: most of the group comes later
        task = self._renders.get(rights)
        if task is None:
            # A fresh context: the rendering is no subscriber's operation.
            task = asyncio.create_task(render(), context=contextvars.Context())
            self._renders[rights] = task
        return await asyncio.shield(task)

    def sending(self, direct: Direct, frames: FrameEncoder) -> Sending | None:
        """What a waiting subscriber is due of this batch, as the frames of its messages
        (built once for every member that gets the same: the same lanes, rendering and
        operation head), the cursor of the last and how many; NOTHING when none is due;
        None when the rendering is not made yet, or one of them must be executed alone."""
        progress = direct.progress
        if progress.past(self):
            return self.whole(direct, frames)
        due = progress.due(self, self.allowed(direct.lanes))
        return self._sending(direct.rights, direct.head, due, frames)

    def whole(self, direct: Direct, frames: FrameEncoder) -> Sending | None:
        """`sending` for a subscriber due every event its lanes allow, as the rest of
        its group is (one past its replay)."""
        key = direct.frames_key
        found = self._whole.get(key)
        if found is None:
            allowed = self.allowed(direct.lanes)
            found = self._sending(direct.rights, direct.head, allowed, frames)
            if found is not None:
                self._whole[key] = found
        return found

    def _sending(
        self, rights: Hashable, head: str, due: Sequence[FeedEvent], frames: FrameEncoder
    ) -> Sending | None:
        if not due:
            return NOTHING
        key = (rights, head, tuple(e.seq for e in due))
        found = self._frames.get(key)
        if found is None:
            rendered = self.renders.ready(rights)
            if rendered is None:
                return None
            payloads = [rendered.get(e.seq) for e in due]
            if None in payloads:
                return None
            written = frames(head + f"{p}}}" for p in payloads)
            found = self._frames[key] = Sending(written, due[-1].cursor, len(due))
        return found

    @property
    def renders(self) -> Batch:
        """The batch its renderings are made on (`source`, or itself)."""
        return self.source or self

    def ready(self, rights: Hashable) -> Rendered | None:
        """The rendering for `rights` if it is made already (None: not yet)."""
        task = self._renders.get(rights)
        if task is None or not task.done():
            return None
        return task.result()


Item = Batch | Closed

# Writes from an armed set between two reads of the clock (`FeedHub._write_armed`).
_WRITES_PER_CLOCK = 64


class _Carrying:
    """The events of one read by the edge properties their records carried before or
    after the change: a gather's group looks only at the events carrying its first
    property (INTERSECT) or one of them (UNION), not at every event of the read."""

    def __init__(self, events: Sequence[FeedEvent]) -> None:
        self.events = events
        self._at: dict[Property, list[int]] = {}
        for n, event in enumerate(events):
            if event.held is not None:
                for prop in event.held.before | event.held.after:
                    self._at.setdefault(prop, []).append(n)

    def of(self, wanted: FeedFilter) -> Sequence[FeedEvent]:
        """The events `wanted` may admit, in feed order (all of them for a filter that
        is not a gather)."""
        props = _keys(wanted)
        if props is None:
            return self.events
        found = sorted({n for p in props for n in self._at.get(p, ())})
        return [self.events[n] for n in found]

    def carried(self) -> Iterable[Property]:
        """Every edge property a record of the read carried before or after."""
        return self._at.keys()


def _keys(wanted: FeedFilter) -> tuple[Property, ...] | None:
    """The edge properties one of which an event's record must carry, before or after,
    for `wanted` to admit it (None: it is not a gather, any event may do)."""
    if wanted.match is None:
        return None
    return wanted.match if wanted.union else wanted.match[:1]


def _share_renderings(batches: Iterable[Batch]) -> None:
    """Let the batches of one read whose groups run the same operation render from one
    batch of all their events: the rendering of an event depends on the operation and
    the rights, not on which subscribers the event was for."""
    by_share: dict[Hashable, list[Batch]] = {}
    for batch in batches:
        if batch.share is not None:
            by_share.setdefault(batch.share, []).append(batch)
    for alike in by_share.values():
        if len(alike) < 2:
            continue
        union = {e.seq: e for batch in alike for e in batch.events}
        source = Batch(tuple(union[seq] for seq in sorted(union)))
        for batch in alike:
            batch.source = source


@dataclass
class Progress:
    """Where one subscription stands: the cursor of the last event sent to it, and
    what its replay from the table covered (`start`, and the snapshot `seen` it read),
    so that a live event it replayed is not sent again."""

    last: str | None
    start: int = 0
    seen: Snapshot | None = None

    def past(self, batch: Batch) -> bool:
        """Whether every event of `batch` is past the cursor and began after the replay's
        snapshot, so the replay saw none of them: the usual case once live."""
        seen = self.seen
        return seen is None or (batch.lowest_seq > self.start and batch.lowest_txid >= seen.xmax)

    def due(self, batch: Batch, allowed: Sequence[FeedEvent]) -> Sequence[FeedEvent]:
        """Of `allowed` (events of `batch`), those not yet sent: after the cursor, and
        not already replayed."""
        seen = self.seen
        if seen is None or self.past(batch):
            return allowed
        return [e for e in allowed if not (e.seq <= self.start or seen.finished(e.txid))]


@dataclass(frozen=True)
class Direct:
    """What the hub needs to serve a waiting subscriber itself, under the rights its
    task last decided (see the module's docstring)."""

    version: int
    """The policy version `lanes` were decided under."""
    lanes: frozenset[str]
    rights: Hashable
    """The key its renderings are shared under (`Batch.rendered`)."""
    render: Callable[[Sequence[FeedEvent]], Coroutine[Any, Any, Rendered]]
    send: Callable[[str], Coroutine[Any, Any, None]]
    progress: Progress
    head: str = ""
    """Its operation's messages up to their payload (`Outlet.head`)."""
    raw: SocketOutlet | None = None
    """Its socket, for group writes (None: sent the ordinary way)."""
    open: Callable[[], bool] = lambda: True
    """Whether its operation still runs (a completed one is sent nothing)."""
    frames_key: Hashable = field(init=False, repr=False)
    """What the frames of a group write to it depend on (`Batch.sending`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "frames_key", (self.lanes, self.rights, self.head))


@dataclass(frozen=True)
class Bearer:
    """The token a subscription's socket authenticated with, and the agent it named."""

    secret: str
    agent: str


@dataclass(eq=False)
class Subscriber:
    """One subscription's filters and queue; events for it arrive in feed order.

    `share` names the operation it runs (None: it shares nothing); subscribers with
    equal filters and `share` receive the same `Batch` objects.
    """

    lanes: frozenset[str] | None
    kinds: frozenset[str]
    # None: nothing new; the hub found its token revoked.
    queue: asyncio.Queue[Item | None]
    share: Hashable | None = None
    wanted: FeedFilter = field(default_factory=FeedFilter)
    bearer: Bearer | None = None
    # Set by the hub when `bearer` no longer names its agent: nothing more is sent to
    # it directly, and its task ends the operation.
    revoked: bool = False
    # Set by its task while it waits with nothing queued: the hub may send to it.
    direct: Direct | None = None
    # Sends the hub started that had to wait for the socket; the task finishes them
    # before anything it takes from the queue.
    pending: asyncio.Future[None] | None = None

    # Subscribers with equal filters and `share`, numbered by the hub (`group`).
    group_id: int = -1
    # Set by the hub while it writes to it from its group's armed members (`_Armed`).
    armed: _Armed | None = None

    @property
    def group(self) -> Hashable:
        return (self.lanes, self.kinds, self.wanted, self.share)

    def wants(self, event: FeedEvent) -> bool:
        e = event.event
        if e.kind not in self.kinds:
            return False
        # Lane-less events (policy changes) concern every lane.
        if self.lanes is not None and not RULE.may_read_event(e.lane, self.lanes):
            return False
        return self.wanted.everything or self.wanted.admits(e, event.held or NOTHING_CARRIED)

    async def next(self) -> Item | None:
        """The next batch, or None when the hub found its token revoked."""
        return await self.queue.get()


async def _send_rest(
    waiting: asyncio.Future[None],
    sending: FeedEvent,
    direct: Direct,
    rest: list[tuple[FeedEvent, str | None]],
) -> None:
    """Finish the send the socket held up (of `sending`), then send the rest, in order."""
    await waiting
    direct.progress.last = sending.cursor
    for event, payload in rest:
        assert payload is not None
        await direct.send(payload)
        direct.progress.last = event.cursor


def _failed(exc: Exception) -> asyncio.Future[None]:
    failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    failed.set_exception(exc)
    return failed


@dataclass(eq=False, slots=True)
class _Flight:
    """A batch being written to an armed set's members: their entries in order, how many
    were reached, the batch's cursor, and the members disarmed before their write (left
    to the ordinary path for this batch)."""

    order: list[tuple[Subscriber, Any]]
    reached: int = 0
    cursor: str | None = None
    left: list[Subscriber] = field(default_factory=list)
    # Each member's place in `order`, made at the first disarm (None: not made, or
    # `order` changed since).
    _at: dict[Subscriber, int] | None = None

    def reorder(self, order: list[tuple[Subscriber, Any]]) -> None:
        self.order[:] = order
        self._at = None

    def written(self, subscriber: Subscriber) -> bool:
        """Whether the batch was written to `subscriber` (its place is before `reached`)."""
        if self._at is None:
            self._at = {entry[0]: n for n, entry in enumerate(self.order)}
        return self._at.get(subscriber, len(self.order)) < self.reached


@dataclass(eq=False)
class _Armed:
    """Members of one group that take the same frames (`Direct.frames_key`), each found
    at its last write in the state a write straight to its socket needs (`FeedHub._arm`)
    and watched since for whatever would change that: the hub waking it, the server
    writing to its socket itself or closing it, the socket pushing back, the policy
    version moving on (`FeedHub._disarm`); its operation ends only after the hub woke it,
    or when its task is cancelled, which forgets it. A batch for them is one write per
    member, with no other per-member work."""

    group: _Group
    version: int
    direct: Direct
    """One member's: the rendering, and what the frames depend on, are the same for all."""
    # Each member's socket, its progress, and `writes` when it was armed; and, in the
    # order they were armed, each with the transport its frames are written to.
    members: dict[Subscriber, tuple[SocketOutlet, Progress, int]] = field(default_factory=dict)
    entries: dict[Subscriber, tuple[Subscriber, Any]] = field(default_factory=dict)
    # The newest replay among them (`Progress.start` and its snapshot's xmax): a batch
    # past it is past every member's (`Progress.past`).
    start: int = -1
    xmax: int = 0
    writes: int = 0
    cursor: str | None = None
    """The cursor of the last event written to every member armed at the time."""
    flight: _Flight | None = None

    def covers(self, batch: Batch) -> bool:
        return batch.lowest_seq > self.start and batch.lowest_txid >= self.xmax


def _drop_if_empty(armed: _Armed) -> None:
    """Take an armed set without members out of its group (unless it was replaced)."""
    sets = armed.group.armed
    key = armed.direct.frames_key
    if not armed.members and sets.get(key) is armed:
        del sets[key]


@dataclass(eq=False)
class _Group:
    """The subscribers of one group (`Subscriber.group_id`): those served one by one, in
    the order they came, and those armed, by the frames they take."""

    like: Subscriber
    """A member: the filters they all share."""
    plain: dict[Subscriber, None] = field(default_factory=dict)
    armed: dict[Hashable, _Armed] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.plain and not any(a.members for a in self.armed.values())


@dataclass(frozen=True)
class FeedStats:
    """What the hub of one process is doing, for the metrics."""

    subscribers: int
    groups: int
    deliveries: int
    closed_slow: int
    lag_seconds: float


@dataclass
class _TokenCheck:
    agent: str | None
    at: float


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
    _subscribers: set[Subscriber] = field(default_factory=set)
    # The subscribers of each group (`Subscriber.group_id`): a read looks at each group
    # once, and at the members of those it has events for.
    _groups: dict[int, _Group] = field(default_factory=dict)
    # The groups by the edge properties one of which a record must carry for them
    # (`_keys`), and those any event may concern: a read visits only the groups its
    # records' properties name, however many gathers are followed.
    _keyed: dict[Property, dict[int, None]] = field(default_factory=dict)
    _unkeyed: dict[int, None] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _token_checks: asyncio.Task[None] | None = None
    _dispatcher: asyncio.Task[None] | None = None
    # What the reader handed out, in order, not yet offered to every subscriber.
    _pending: deque[Sequence[FeedEvent]] = field(default_factory=deque)
    _handed_out: asyncio.Event = field(default_factory=asyncio.Event)
    _tokens: dict[str, _TokenCheck] = field(default_factory=dict)
    # Set when a token was revoked somewhere (or notices may have been missed).
    _token_notice: asyncio.Event = field(default_factory=asyncio.Event)
    # When the read-side policy cache goes stale, the subscribers handed one batch all
    # ask for the policy at once; one reads it, the rest then find it cached.
    _policy_read: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Events sent by the hub itself (`Direct`), and the writes of group frames (each
    # one or more events to one socket), counted for tests.
    sent_directly: int = 0
    group_writes: int = 0
    # Of the group writes, those made to armed members (`_Armed`).
    armed_writes: int = 0
    # Subscribers filtering on a gather: while there are any, the reader reads each
    # event's memberships with it.
    _gathering: int = 0
    _group_ids: dict[Hashable, int] = field(default_factory=dict)
    # Batches handed to subscribers, and subscribers closed as too slow (the metrics).
    deliveries: int = 0
    closed_slow: int = 0
    # From the newest event's write to its hand-out by the reader, when it was handed out.
    lag_seconds: float = 0.0
    # Subscribers served since the fan-out began, and when it next lets the loop turn.
    _served: int = 0
    _turn: float = 0.0

    def __post_init__(self) -> None:
        # None: no group writes, every message goes through the socket's ordinary send.
        self._frames = self.frames if self.options.group_writes else None
        self.reader = FeedReader(
            self.database_url,
            self._fan_out,
            lambda: bool(self._subscribers),
            poll_interval=self.options.poll_seconds,
            order_wait=self.options.order_wait_seconds,
            notices={tokens.REVOKED_CHANNEL: self._token_revoked},
            memberships_wanted=lambda: self._gathering > 0,
        )

    async def start(self) -> None:
        self._task = asyncio.create_task(self.reader.run(), name="edgeloom-feed")
        self._dispatcher = asyncio.create_task(self._dispatch(), name="edgeloom-feed-fan-out")
        self._token_checks = asyncio.create_task(
            self._check_tokens(), name="edgeloom-feed-token-checks"
        )

    async def stop(self) -> None:
        for subscriber in list(self._subscribers):
            self._close(subscriber, Closed.STOPPING)
        for task in (self._task, self._dispatcher, self._token_checks):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _token_revoked(self, token_id: str | None) -> None:
        """A token was revoked (None: the reader reconnected, and may have missed one)."""
        self._token_notice.set()

    async def _check_tokens(self) -> None:
        """Twice per token recheck interval, check every token the subscribers hold
        (`token_agent`: one query per token per interval) and wake those whose token
        was revoked, so that even a quiet feed ends their operations; at once, and
        bypassing what was cached, when a revocation is notified."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._token_notice.wait(), self.options.token_recheck_seconds / 2
                )
            notified = self._token_notice.is_set()
            self._token_notice.clear()
            try:
                await self._revoke_stale_tokens(fresh=notified)
            except Exception:  # the database is away: try again next time
                if notified:  # soon again, not only at the next interval
                    self._token_notice.set()
                    await asyncio.sleep(self.options.token_recheck_seconds / 8)
                log.warning("checking subscribers' tokens failed", exc_info=True)

    async def _revoke_stale_tokens(self, fresh: bool = False) -> None:
        subscribers = [s for s in self._subscribers if s.bearer is not None and not s.revoked]
        secrets = {s.bearer.secret for s in subscribers if s.bearer is not None}
        if fresh:
            # One statement for every token held, and the cache the subscribers' own
            # checks read is brought up to date with it.
            agents = await tokens.agents_for(self.engine, secrets)
            now = time.monotonic()
            for secret, agent in agents.items():
                self._tokens[secret] = _TokenCheck(agent, now)
        else:
            agents = {secret: await self.token_agent(secret) for secret in secrets}
        for subscriber in subscribers:
            assert subscriber.bearer is not None
            if agents[subscriber.bearer.secret] != subscriber.bearer.agent:
                subscriber.revoked = True
                self._disarm(subscriber)
                with contextlib.suppress(asyncio.QueueFull):  # then it is woken anyway
                    subscriber.queue.put_nowait(None)

    async def policy(self) -> PolicyVersion | None:
        """The policy in force for reads (`policy_store.current`), read once for a crowd."""
        async with self._policy_read:
            return await policy_store.current(self.pool, self.policies)

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
        gathering = subscriber.wanted.needs_memberships
        if not self._subscribers:
            self._group_ids.clear()  # no one holds a number: start afresh
        # A number per group, so a read finds each group's batch without hashing filters.
        subscriber.group_id = self._group_ids.setdefault(subscriber.group, len(self._group_ids))
        self._subscribers.add(subscriber)
        group = self._groups.get(subscriber.group_id)
        if group is None:
            group = self._groups[subscriber.group_id] = _Group(subscriber)
            self._index(subscriber, add=True)
        group.plain[subscriber] = None
        self._gathering += gathering
        try:
            self.reader.wake()
            if not await self.reader.live(self.options.start_timeout_seconds):
                raise FeedUnavailableError()
            yield subscriber
        finally:
            self._forget(subscriber)
            self._gathering -= gathering
            subscriber.direct = None
            if subscriber.pending is not None:
                subscriber.pending.cancel()

    @property
    def armed(self) -> int:
        """How many subscribers are armed now."""
        return sum(len(a.members) for g in self._groups.values() for a in g.armed.values())

    def stats(self) -> FeedStats:
        return FeedStats(
            subscribers=len(self._subscribers),
            groups=len(self._groups),
            deliveries=self.deliveries,
            closed_slow=self.closed_slow,
            lag_seconds=self.lag_seconds,
        )

    def _fan_out(self, events: Sequence[FeedEvent]) -> None:
        """The reader's sink: the events are offered to the subscribers by `_dispatch`."""
        if events:
            written = events[-1].event.at
            self.lag_seconds = max(0.0, (datetime.now(written.tzinfo) - written).total_seconds())
        self._pending.append(events)
        self._handed_out.set()

    async def _dispatch(self) -> None:
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
        if self._gathering and any(e.held is None for e in events):
            events = await self._with_memberships(events)
        carrying = _Carrying(events) if self._gathering else None
        unheld = carrying is not None and any(e.held is None for e in events)
        # Filtered once per group, from one member: the members differ in nothing a
        # filter looks at.
        offers: list[tuple[Batch, _Group]] = []
        if carrying is None or unheld:
            groups = list(self._groups.values())
        else:
            ids = dict.fromkeys(self._unkeyed)
            for prop in carrying.carried():
                ids.update(self._keyed.get(prop, ()))
            groups = [self._groups[i] for i in ids]
        for group in groups:
            like = group.like
            if unheld and like.wanted.needs_memberships:
                # Their memberships could not be read: they resume from the table.
                for subscriber in self._members(group):
                    self._close(subscriber, Closed.TOO_SLOW)
                continue
            candidates = events if carrying is None else carrying.of(like.wanted)
            mine = tuple(e for e in candidates if like.wants(e))
            if mine:
                offers.append((Batch(mine, like.wanted, share=like.share), group))
        _share_renderings(batch for batch, _ in offers)
        self._turn = time.perf_counter() + self.options.turn_seconds
        for batch, group in offers:
            plain = list(group.plain)
            for armed in list(group.armed.values()):
                plain.extend(await self._write_armed(armed, batch, in_force))
            for subscriber in plain:
                if subscriber not in self._subscribers:
                    continue  # gone, or closed, during an earlier turn
                if self._write(subscriber, batch, in_force) or (
                    await self._send_directly(subscriber, batch, in_force)
                ):
                    self._arm(group, subscriber, in_force)
                else:
                    try:
                        subscriber.queue.put_nowait(batch)
                    except asyncio.QueueFull:
                        self._close(subscriber, Closed.TOO_SLOW)
                self.deliveries += 1
                await self._may_turn()

    async def _may_turn(self) -> None:
        """Let the event loop turn once the fan-out has served subscribers (sent to or
        woken them) for `turn_seconds` since it last did (the clock read every 8th)."""
        self._served += 1
        if not self._served % 8 and time.perf_counter() >= self._turn:
            await asyncio.sleep(0)
            self._turn = time.perf_counter() + self.options.turn_seconds

    def _members(self, group: _Group) -> list[Subscriber]:
        return [*group.plain, *(s for armed in group.armed.values() for s in armed.members)]

    def _arm(self, group: _Group, subscriber: Subscriber, in_force: int | None) -> None:
        """Arm a subscriber just written to when nothing stands in the way of the next
        write going straight to its socket, and watch its socket for what would."""
        direct = self._waiting(subscriber, in_force)
        if (
            direct is None
            or subscriber.armed is not None
            or self._frames is None
            or not direct.open()
        ):
            return
        raw = direct.raw
        if raw is None or not raw.ready() or not raw.drained():
            return
        key = direct.frames_key
        armed = group.armed.get(key)
        if armed is not None and armed.version != direct.version:
            self._disarm_all(armed)
            armed = None
        if not raw.watch(subscriber, partial(self._disarm, subscriber)):
            return
        if armed is None:
            armed = group.armed[key] = _Armed(group, direct.version, direct)
        progress = direct.progress
        if progress.seen is not None:
            armed.start = max(armed.start, progress.start)
            armed.xmax = max(armed.xmax, progress.seen.xmax)
        armed.members[subscriber] = (raw, progress, armed.writes)
        armed.entries[subscriber] = (subscriber, raw.transport)
        subscriber.armed = armed
        del group.plain[subscriber]

    def _disarm(self, subscriber: Subscriber) -> None:
        """Serve `subscriber` one by one again, its progress brought up to what its armed
        set wrote to it."""
        armed = subscriber.armed
        if armed is None:
            return
        subscriber.armed = None
        raw, progress, armed_at = armed.members.pop(subscriber)
        del armed.entries[subscriber]
        raw.unwatch(subscriber)
        flight = armed.flight
        if flight is not None and flight.written(subscriber):
            progress.last = flight.cursor  # written this batch
        else:
            if flight is not None:
                flight.left.append(subscriber)
            if armed.writes > armed_at:  # written since it was armed
                progress.last = armed.cursor
        armed.group.plain[subscriber] = None
        if flight is None:
            _drop_if_empty(armed)

    def _disarm_all(self, armed: _Armed) -> list[Subscriber]:
        """Disarm every member of `armed`; returns them."""
        members = list(armed.members)
        for member in members:
            self._disarm(member)
        return members

    async def _write_armed(
        self, armed: _Armed, batch: Batch, in_force: int | None
    ) -> list[Subscriber]:
        """Write `batch` to the members of `armed`: the group's frames, one write each.
        Returns the members left to the ordinary path for it (disarmed before their
        write, or all of them when the batch cannot be written this way)."""
        frames = self._frames
        if frames is None or armed.version != in_force or not armed.covers(batch):
            return self._disarm_all(armed)
        flight = armed.flight = _Flight(list(armed.entries.values()))
        try:
            sending = batch.whole(armed.direct, frames)
            if sending is None:
                direct, source = armed.direct, batch.renders
                render = partial(direct.render, source.allowed(direct.lanes))
                await source.rendered(direct.rights, render)
                sending = batch.whole(direct, frames)
                if flight.left:  # disarmed while the rendering was made
                    flight.reorder(list(armed.entries.values()))
            if sending is None:  # an event to execute for each alone
                self._disarm_all(armed)
                return flight.left
            self.deliveries += len(flight.order)
            if not sending.count:
                return flight.left
            flight.cursor, written = sending.cursor, sending.frames
            order = flight.order
            wrote = 0
            for n in range(0, len(order), _WRITES_PER_CLOCK):
                if n and time.perf_counter() >= self._turn:
                    flight.reached, left = n, len(flight.left)
                    await asyncio.sleep(0)
                    self._turn = time.perf_counter() + self.options.turn_seconds
                    if len(flight.left) != left:  # some were disarmed meanwhile
                        flight.reorder(order[:n] + [e for e in order[n:] if e[0].armed is armed])
                for at, (subscriber, transport) in enumerate(order[n : n + _WRITES_PER_CLOCK], n):
                    try:
                        transport.write(written)
                    except RuntimeError:  # lost under it: its task is told and ends
                        flight.reached = at
                        self._disarm(subscriber)
                        continue
                    wrote += 1
                    if transport.get_write_buffer_size():  # pushing back: the ordinary path sees
                        flight.reached = at + 1
                        self._disarm(subscriber)
            self.group_writes += wrote
            self.armed_writes += wrote
            self.sent_directly += wrote * sending.count
            armed.writes += 1
            armed.cursor = flight.cursor
            return flight.left
        finally:
            armed.flight = None
            _drop_if_empty(armed)

    async def _with_memberships(self, events: Sequence[FeedEvent]) -> Sequence[FeedEvent]:
        """`events` with their records' memberships, for a gathering subscriber that came
        after the reader read them (the events as they were if the read fails)."""
        try:
            async with self.pool.acquire() as conn:
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

    def _waiting(self, subscriber: Subscriber, in_force: int | None) -> Direct | None:
        """How the hub may serve `subscriber` itself now (None: through its queue)."""
        direct = subscriber.direct
        if (
            direct is None
            or direct.version != in_force
            or subscriber.revoked
            or subscriber.pending is not None
            or not subscriber.queue.empty()
        ):
            return None
        return direct

    def _write(self, subscriber: Subscriber, batch: Batch, in_force: int | None) -> bool:
        """The common case, with no coroutine: a waiting subscriber whose socket takes a
        frame now, written the group's frames once they are made; False: not done here."""
        direct = self._waiting(subscriber, in_force)
        frames = self._frames
        if direct is None or frames is None:
            return False
        raw = direct.raw
        if raw is None or not raw.ready():
            return False
        sending = batch.sending(direct, frames)
        if sending is None:
            return False
        if sending.count:
            if direct.open():
                raw.write(sending.frames)
                self.group_writes += 1
            direct.progress.last = sending.cursor
            self.sent_directly += sending.count
        return True

    async def _send_directly(
        self, subscriber: Subscriber, batch: Batch, in_force: int | None
    ) -> bool:
        """Send `batch` to a waiting subscriber from here, making the rendering first if
        no member has, or message by message through its socket's ordinary send when a
        group write cannot be made; False: queue it instead."""
        direct = self._waiting(subscriber, in_force)
        if direct is None:
            return False
        allowed = batch.allowed(direct.lanes)
        due = direct.progress.due(batch, allowed)
        if not due:
            return True
        source = batch.renders
        rendered = source.ready(direct.rights)
        if rendered is None:
            render = partial(direct.render, source.allowed(direct.lanes))
            rendered = await source.rendered(direct.rights, render)
            if subscriber.direct is not direct or not subscriber.queue.empty():
                return False  # its task woke while the rendering was made
            if self._write(subscriber, batch, in_force):
                return True
        payloads = [rendered.get(e.seq) for e in due]
        if None in payloads:
            return False  # an event to execute for this subscriber alone
        for number, (event, payload) in enumerate(zip(due, payloads, strict=True)):
            assert payload is not None
            try:
                waiting = run_eagerly(direct.send(payload))
            except Exception as exc:  # the socket is gone: its task ends the operation
                subscriber.direct = None
                subscriber.pending = _failed(exc)
                subscriber.queue.put_nowait(None)
                return True
            if waiting is not None:
                rest = list(zip(due[number + 1 :], payloads[number + 1 :], strict=True))
                subscriber.pending = asyncio.ensure_future(_send_rest(waiting, event, direct, rest))
                return True
            direct.progress.last = event.cursor
            self.sent_directly += 1
        return True

    def _forget(self, subscriber: Subscriber) -> None:
        if subscriber not in self._subscribers:
            return
        self._disarm(subscriber)
        self._subscribers.discard(subscriber)
        group = self._groups[subscriber.group_id]
        del group.plain[subscriber]
        if group.empty:
            del self._groups[subscriber.group_id]
            self._index(group.like, add=False)

    def _index(self, like: Subscriber, add: bool) -> None:
        """Enter a new group in `_keyed` or `_unkeyed`, or take a gone one out."""
        keys = _keys(like.wanted)
        places = [self._unkeyed] if keys is None else [self._keyed.setdefault(p, {}) for p in keys]
        for ids in places:
            if add:
                ids[like.group_id] = None
            else:
                ids.pop(like.group_id, None)
        if not add and keys is not None:
            for p in keys:
                if not self._keyed.get(p, True):
                    del self._keyed[p]

    def _close(self, subscriber: Subscriber, why: Closed) -> None:
        """Stop feeding a subscriber and tell it why, in place of what it had queued.

        What it had not taken yet is dropped here, but not lost: it resumes from the
        last event it delivered and replays the rest from the table.
        """
        self._forget(subscriber)
        if why is Closed.TOO_SLOW:
            self.closed_slow += 1
        while not subscriber.queue.empty():
            subscriber.queue.get_nowait()
        subscriber.queue.put_nowait(why)

    async def token_agent(self, secret: str) -> str | None:
        """The agent of a live token, checked at most once per recheck interval.

        Shared by every subscription of the process, so many subscribers holding one
        token cost one query per interval.
        """
        now = time.monotonic()
        known = self._tokens.get(secret)
        if known is not None and now - known.at < self.options.token_recheck_seconds:
            return known.agent
        agent = await tokens.agent_for(self.engine, secret)
        if len(self._tokens) > 10_000:
            self._tokens.clear()
        self._tokens[secret] = _TokenCheck(agent, now)
        return agent
