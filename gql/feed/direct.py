"""Serving a waiting subscriber from the fan-out loop, with no task woken: what it is due
of a batch, as its group's frames (built once for the members alike), written to its
socket, or its messages sent one by one through the socket's ordinary send
(docs/feed_hub.md: the hub sends for a waiting subscriber). The whole route of one
member, from its batch to its socket, is here; an armed set takes the same frames
(`whole`, `render`)."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence
from functools import partial

from gql.feed.batch import NOTHING, Batch, Direct, Rendered, Sending
from gql.feed.eager import run_eagerly
from gql.feed.options import Counts
from gql.feed.outlet import FrameEncoder
from gql.feed.subscriber import Subscriber
from store.feed.live import FeedEvent


class DirectSends:
    """Sends a batch to a subscriber that waits with nothing queued, or says it cannot."""

    def __init__(self, frames: FrameEncoder | None, counts: Counts) -> None:
        # None: no group writes, every message goes through the socket's ordinary send.
        self.frames = frames
        self.counts = counts

    def write(self, subscriber: Subscriber, batch: Batch, in_force: int | None) -> bool:
        """The common case, with no coroutine: a waiting subscriber whose socket takes a
        frame now, written the group's frames once they are made; False: not done here."""
        direct = waiting(subscriber, in_force)
        if direct is None or self.frames is None:
            return False
        raw = direct.raw
        if raw is None or not raw.ready():
            return False
        sending = _sending(direct, batch, self.frames)
        if sending is None:
            return False
        if sending.count:
            if direct.open():
                raw.write(sending.frames)
                self.counts.group_writes += 1
            direct.progress.last = sending.cursor
            self.counts.sent_directly += sending.count
        return True

    async def send(self, subscriber: Subscriber, batch: Batch, in_force: int | None) -> bool:
        """Send `batch` to a waiting subscriber from here, making the rendering first if
        no member has, or message by message through its socket's ordinary send when a
        group write cannot be made; False: queue it instead."""
        direct = waiting(subscriber, in_force)
        if direct is None:
            return False
        allowed = batch.allowed(direct.lanes)
        due = direct.progress.due(batch, allowed)
        if not due:
            return True
        rendered = batch.renders.ready(direct.rights)
        if rendered is None:
            rendered = await render(direct, batch)
            if subscriber.direct is not direct or not subscriber.queue.empty():
                return False  # its task woke while the rendering was made
            if self.write(subscriber, batch, in_force):
                return True
        payloads = [rendered.get(e.seq) for e in due]
        if None in payloads:
            return False  # an event to execute for this subscriber alone
        for number, (event, payload) in enumerate(zip(due, payloads, strict=True)):
            assert payload is not None
            try:
                held = run_eagerly(direct.send(payload))
            except Exception as exc:  # the socket is gone: its task ends the operation
                subscriber.direct = None
                subscriber.pending = _failed(exc)
                subscriber.queue.put_nowait(None)
                return True
            if held is not None:
                rest = list(zip(due[number + 1 :], payloads[number + 1 :], strict=True))
                subscriber.pending = asyncio.ensure_future(_send_rest(held, event, direct, rest))
                return True
            direct.progress.last = event.cursor
            self.counts.sent_directly += 1
        return True


def waiting(subscriber: Subscriber, in_force: int | None) -> Direct | None:
    """How the hub may serve `subscriber` itself now, under the policy version `in_force`
    (None: through its queue)."""
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


async def render(direct: Direct, batch: Batch) -> Rendered:
    """The rendering `direct` takes of `batch`, made by the first member to ask."""
    source = batch.renders
    return await source.rendered(
        direct.rights, partial(direct.render, source.allowed(direct.lanes))
    )


def _sending(direct: Direct, batch: Batch, frames: FrameEncoder) -> Sending | None:
    """What a waiting subscriber is due of `batch`, as the frames of its messages (built
    once for every member that gets the same: the same lanes, rendering and operation
    head), the cursor of the last and how many; NOTHING when none is due; None when the
    rendering is not made yet, or one of them must be executed alone."""
    progress = direct.progress
    if progress.past(batch):
        return whole(direct, batch, frames)
    due = progress.due(batch, batch.allowed(direct.lanes))
    return _framed(batch, direct.rights, direct.head, due, frames)


def whole(direct: Direct, batch: Batch, frames: FrameEncoder) -> Sending | None:
    """`_sending` for a subscriber due every event its lanes allow, as the rest of its
    group is (one past its replay, or an armed set)."""
    key = direct.frames_key
    found = batch.whole.get(key)
    if found is None:
        allowed = batch.allowed(direct.lanes)
        found = _framed(batch, direct.rights, direct.head, allowed, frames)
        if found is not None:
            batch.whole[key] = found
    return found


def _framed(
    batch: Batch, rights: Hashable, head: str, due: Sequence[FeedEvent], frames: FrameEncoder
) -> Sending | None:
    if not due:
        return NOTHING
    key = (rights, head, tuple(e.seq for e in due))
    found = batch.frames.get(key)
    if found is None:
        rendered = batch.renders.ready(rights)
        if rendered is None:
            return None
        payloads = [rendered.get(e.seq) for e in due]
        if None in payloads:
            return None
        written = frames(head + f"{p}}}" for p in payloads)
        found = batch.frames[key] = Sending(written, due[-1].cursor, len(due))
    return found


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
