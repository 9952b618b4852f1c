"""What a resumed subscriber is still due from a live batch, and a batch's shared rendering.

A subscriber that resumed `after` a cursor replayed the table under a snapshot; a live
batch may hold events that replay already sent (their transactions had finished in that
snapshot) beside events it could not see. Only the latter are due.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from gql.feed.hub import Batch, Progress, Rendered
from store.feed.live import FeedEvent, Snapshot
from store.ledger.audit import AuditEvent

# The replay's snapshot: transactions below 100 had ended, except 97, still running.
REPLAYED_UNDER = Snapshot(xmin=97, xmax=100, xip=frozenset({97}))


def event(seq: int, txid: int) -> FeedEvent:
    audit = AuditEvent(
        seq=seq,
        id=f"ev-{seq}",
        kind="sr_ingested",
        record_id=f"sr-{seq}",
        lane="default",
        actor="agent",
        at=datetime(2026, 1, 1, tzinfo=UTC),
        payload={},
        version_before=None,
        version_after=1,
    )
    return FeedEvent(audit, txid)


def due(progress: Progress, *events: FeedEvent) -> list[int]:
    batch = Batch(events)
    return [e.seq for e in progress.due(batch, batch.allowed(frozenset({"default"})))]


def test_a_subscriber_that_replayed_nothing_is_due_every_event() -> None:
    assert due(Progress(last=None), event(5, 90), event(6, 120)) == [5, 6]


def test_events_the_replay_sent_are_not_due_again() -> None:
    progress = Progress(last="10", start=10, seen=REPLAYED_UNDER)
    # 11 committed before the snapshot (replayed); 12's transaction was running
    # then and 13's began after it: both arrive only live.
    assert due(progress, event(11, 95), event(12, 97), event(13, 130)) == [12, 13]


def test_events_at_or_before_the_cursor_are_not_due() -> None:
    progress = Progress(last="10", start=10, seen=REPLAYED_UNDER)
    assert due(progress, event(9, 97), event(10, 97), event(14, 130)) == [14]


def test_one_new_event_does_not_let_a_replayed_one_through() -> None:
    """The batch's lowest seq and transaction decide the shortcut, not its newest."""
    progress = Progress(last="10", start=10, seen=REPLAYED_UNDER)
    assert due(progress, event(20, 140), event(15, 99)) == [20]
    assert due(progress, event(21, 150), event(8, 120)) == [21]


def test_a_batch_wholly_after_the_replay_is_due_whole() -> None:
    progress = Progress(last="10", start=10, seen=REPLAYED_UNDER)
    assert due(progress, event(30, 100), event(31, 101)) == [30, 31]


async def test_a_rendering_is_ready_only_once_made_and_then_shared() -> None:
    batch = Batch((event(1, 100),))
    made: list[str] = []
    gate = asyncio.Event()

    async def render() -> Rendered:
        made.append("rendered")
        await gate.wait()
        return {1: '{"data":{}}'}

    assert batch.ready("rights") is None
    first = asyncio.create_task(batch.rendered("rights", render))
    await asyncio.sleep(0)
    assert batch.ready("rights") is None  # still being made
    gate.set()
    assert await first == {1: '{"data":{}}'}
    assert batch.ready("rights") == {1: '{"data":{}}'}
    assert await batch.rendered("rights", render) == {1: '{"data":{}}'}
    assert made == ["rendered"]
    assert batch.ready("other rights") is None
