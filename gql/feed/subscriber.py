"""A subscriber of the live feed, the group of alike subscribers it belongs to, and the
armed set of those the hub writes one group's frames to (docs/feed_hub.md)."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Hashable
from dataclasses import dataclass, field

from gql.feed.batch import Batch, Direct, Progress
from gql.feed.outlet import SocketOutlet, Transport
from store.feed.filters import NOTHING_CARRIED, FeedFilter
from store.feed.live import FeedEvent
from store.reads.visibility import RULE


class Closed(enum.Enum):
    """Why a subscription's queue was closed by the hub."""

    TOO_SLOW = "too slow"
    STOPPING = "stopping"


Item = Batch | Closed


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
    # Set by the hub while it writes to it from its group's armed members (`Armed`).
    armed: Armed | None = None

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


@dataclass(eq=False, slots=True)
class Flight:
    """A batch being written to an armed set's members: their entries in order, how many
    were reached, the batch's cursor, and the members disarmed before their write (left
    to the ordinary path for this batch)."""

    order: list[tuple[Subscriber, Transport]]
    reached: int = 0
    cursor: str | None = None
    left: list[Subscriber] = field(default_factory=list)
    # Each member's place in `order`, made at the first disarm (None: not made, or
    # `order` changed since).
    _at: dict[Subscriber, int] | None = None

    def reorder(self, order: list[tuple[Subscriber, Transport]]) -> None:
        self.order[:] = order
        self._at = None

    def written(self, subscriber: Subscriber) -> bool:
        """Whether the batch was written to `subscriber` (its place is before `reached`)."""
        if self._at is None:
            self._at = {entry[0]: n for n, entry in enumerate(self.order)}
        return self._at.get(subscriber, len(self.order)) < self.reached


@dataclass(eq=False)
class Armed:
    """Members of one group that take the same frames (`Direct.frames_key`), each found
    at its last write in the state a write straight to its socket needs (`Arming.arm`)
    and watched since for whatever would change that: the hub waking it, the server
    writing to its socket itself or closing it, the socket pushing back, the policy
    version moving on (`Arming.disarm`); its operation ends only after the hub woke it,
    or when its task is cancelled, which forgets it. A batch for them is one write per
    member, with no other per-member work."""

    group: Group
    version: int
    direct: Direct
    """One member's: the rendering, and what the frames depend on, are the same for all."""
    # Each member's socket, its progress, and `writes` when it was armed; and, in the
    # order they were armed, each with the transport its frames are written to.
    members: dict[Subscriber, tuple[SocketOutlet, Progress, int]] = field(default_factory=dict)
    entries: dict[Subscriber, tuple[Subscriber, Transport]] = field(default_factory=dict)
    # The newest replay among them (`Progress.start` and its snapshot's xmax): a batch
    # past it is past every member's (`Progress.past`).
    start: int = -1
    xmax: int = 0
    writes: int = 0
    cursor: str | None = None
    """The cursor of the last event written to every member armed at the time."""
    flight: Flight | None = None

    def covers(self, batch: Batch) -> bool:
        return batch.lowest_seq > self.start and batch.lowest_txid >= self.xmax


def drop_if_empty(armed: Armed) -> None:
    """Take an armed set without members out of its group (unless it was replaced)."""
    sets = armed.group.armed
    key = armed.direct.frames_key
    if not armed.members and sets.get(key) is armed:
        del sets[key]


@dataclass(eq=False)
class Group:
    """The subscribers of one group (`Subscriber.group_id`): those served one by one, in
    the order they came, and those armed, by the frames they take."""

    like: Subscriber
    """A member: the filters they all share."""
    plain: dict[Subscriber, None] = field(default_factory=dict)
    armed: dict[Hashable, Armed] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.plain and not any(a.members for a in self.armed.values())
