"""A read's events as a group of subscribers gets them (`Batch`), what a subscriber is
due of them (`Progress`), and how the hub may serve one that waits (`Direct`).

Every member of a group gets the same `Batch`, so what they derive from it under equal
rights (the rendering, the frames of a group write) is derived once (docs/feed_hub.md);
how a member's frames are made from it is the member's route (`gql.feed.direct`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gql.feed.outlet import SocketOutlet
from store.feed.filters import FeedFilter
from store.feed.live import FeedEvent, Snapshot
from store.reads.visibility import RULE

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
    task last decided (docs/feed_hub.md: the hub sends for a waiting subscriber)."""

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
    """What the frames of a group write to it depend on (`gql.feed.direct.sending`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "frames_key", (self.lanes, self.rights, self.head))


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
    _renders: dict[Hashable, asyncio.Task[Rendered]] = field(default_factory=dict)
    _allowed: dict[frozenset[str], list[FeedEvent]] = field(default_factory=dict)
    # The frames built for members alike (`gql.feed.direct`): by the events they are due,
    # and, for those due every event their lanes allow, by `Direct.frames_key`.
    frames: dict[Hashable, Sending] = field(default_factory=dict)
    whole: dict[Hashable, Sending] = field(default_factory=dict)
    # The lowest seq and transaction id among the events: a subscriber whose replay
    # ended below both has none of them behind it (`Progress.due`).
    lowest_seq: int = field(init=False)
    lowest_txid: int = field(init=False)
    # The batch its renderings are made on: itself, or the batch of every event of the
    # read that a group running the same operation wants (`share_renderings`).
    renders: Batch = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.renders = self
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

    def ready(self, rights: Hashable) -> Rendered | None:
        """The rendering for `rights` if it is made already (None: not yet)."""
        task = self._renders.get(rights)
        if task is None or not task.done():
            return None
        return task.result()


def share_renderings(batches: Iterable[Batch]) -> None:
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
            batch.renders = source
