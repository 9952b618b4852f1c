"""Serving a waiting subscriber from the fan-out loop, with no task woken: its group's
frames written to its socket, or its messages sent one by one through the socket's
ordinary send (docs/feed_hub.md: the hub sends for a waiting subscriber)."""

from __future__ import annotations

import asyncio
from functools import partial

from gql.feed.batch import Batch, Direct
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
        direct = subscriber.waiting(in_force)
        if direct is None or self.frames is None:
            return False
        raw = direct.raw
        if raw is None or not raw.ready():
            return False
        sending = batch.sending(direct, self.frames)
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
        direct = subscriber.waiting(in_force)
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
            if self.write(subscriber, batch, in_force):
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
            self.counts.sent_directly += 1
        return True


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
