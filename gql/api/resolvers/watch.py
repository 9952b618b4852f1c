"""`watch`: the live membership of one gather, the blackboard an agent team works on.

A watch is the feed filtered on a gather (`store.feed.filters`), each event told as what
it does to the gather's membership: a record JOINED it, LEFT it, or CHANGED on it. With
`initial`, the members first, read in one snapshot, and then every change that snapshot
could not see, the seam the replay uses (docs/feed.md).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, Sequence

import strawberry

from gql.api.context import Context
from gql.api.resolvers.feed_filters import FeedArguments
from gql.api.resolvers.feed_rights import (
    Rights,
    token_revoked,
)
from gql.api.types import GatherMode, Record
from gql.feed.batch import Progress
from gql.feed.hub import FeedUnavailableError
from store.errors import InvalidInputError
from store.feed import live as feed
from store.feed import replay as feed_replay
from store.feed.entries import Entries, entry_at
from store.feed.filters import NOTHING_CARRIED, Change, FeedFilter
from store.kinds.edge.model import EVENT_KINDS as EDGE_EVENT_KINDS
from store.kinds.record import model as domain
from store.kinds.record.reads import gather as gather_read
from store.ledger.events import check_kinds
from store.reads import gather_mode
from store.reads.pages import MAX_PAGE
from store.reads.visibility import RULE

WATCH_HELP = (
    "The live membership of one gather (the records `gather(match:, mode:)` returns): a "
    "change each time a record joins it, leaves it, or changes while on it (its content, "
    "its properties, a connection, group, chain or correction on it), one per record for "
    "each write however many events the write reported. Typed edges are no part of a "
    "record, so their events are not told here (follow them with auditEvents(recordIds:)). "
    "With `initial: "
    "true`, the current members first, as JOINED; then live. To resume without a gap, "
    "subscribe again with `after` set to the last change's cursor (and no `initial`)."
)
WATCH_MATCH_HELP = (
    "The gather to watch: edge properties `label:value`, combined by `mode`, as "
    "`gather(match:)` takes them."
)
INITIAL_HELP = (
    "Start with the gather's current members, each as JOINED (all carrying the same "
    "cursor: the feed's position when they were read)."
)
AFTER_HELP = (
    "Resume after this cursor (a change's `cursor`): the changes since, replayed from the "
    "table, then live. Not together with `initial`."
)


@strawberry.enum(description="What a change does to a watched gather's membership.")
class WatchChangeKind(enum.Enum):
    JOINED = strawberry.enum_value(
        "JOINED", description="the record is on the gather now, and was not before"
    )
    LEFT = strawberry.enum_value("LEFT", description="the record was on the gather, and is not now")
    CHANGED = strawberry.enum_value(
        "CHANGED", description="the record changed and is on the gather before and after"
    )


@strawberry.type(description="One change to the membership of a watched gather.")
class WatchChange:
    change: WatchChangeKind = strawberry.field(
        description="JOINED, LEFT or CHANGED: what happened to the record's membership."
    )
    record: Record = strawberry.field(
        description="The record as the change left it (for an initial member: as it is; "
        "for a retirement: its tombstone, at that version, with `retired`)."
    )
    cursor: str = strawberry.field(
        description="The feed position of the change; pass as `after` to resume after it."
    )


_KINDS = {c: WatchChangeKind(c.value) for c in Change}


async def watch_changes(
    context: Context,
    match: Sequence[str],
    mode: GatherMode | None,
    initial: bool,
    after: str | None,
) -> AsyncGenerator[WatchChange, None]:
    """The changes of one watch, as `WATCH_HELP` says."""
    hub = context.services.feed
    if hub is None:
        raise FeedUnavailableError()
    if initial and after is not None:
        raise InvalidInputError(
            "watch takes initial: true (start from the current members) or after (resume "
            "from a cursor), not both"
        )
    rights = Rights(context, hub)
    await rights.lanes()
    wanted = await FeedArguments(match, mode, None).resolve(context)
    # A typed edge is no part of the record a change carries: its events are not told.
    kinds = [k for k in check_kinds(None) if k not in EDGE_EVENT_KINDS]
    position = None if after is None else await feed_replay.check_cursor(context.engine, after)
    progress = Progress(last=after, start=position or 0)
    # One write is one change per record, however many events it reported.
    entries = Entries()
    async with hub.subscribe(None, kinds, ("watch",), rights.bearer, wanted) as subscriber:
        if position is not None:
            entries.last = await entry_at(context.engine, position)
            progress.seen = await feed_replay.take_snapshot(context.engine)
            async for page in feed_replay.replay(
                context.engine, position, progress.seen, rights.lane_list, kinds, wanted=wanted
            ):
                await rights.check_token()
                for item in page:
                    if subscriber.revoked:
                        raise token_revoked(context)
                    change = await _change(context, wanted, item, entries)
                    if change is not None:
                        yield change
                    progress.last = item.cursor
        elif initial:
            async for change in _members(context, wanted, progress):
                yield change
        while True:
            batch = await rights.next(subscriber)
            for item in await rights.due(batch, subscriber, progress):
                change = await _change(context, wanted, item, entries)
                if change is not None:
                    yield change
                progress.last = item.cursor


async def _change(
    context: Context, wanted: FeedFilter, item: feed.FeedEvent, entries: Entries
) -> WatchChange | None:
    """The change `item` makes to the gather, with its record as the change left it (None
    for the second and later events of one record entry: the first told it)."""
    if not entries.first(item.event):
        return None
    kind = wanted.change(item.held or NOTHING_CARRIED)
    record_id = item.event.record_id
    if kind is None or record_id is None:
        return None
    context.begin_operation()
    at = item.event.at
    found = (await context.records([record_id], at)).get(record_id)
    if found is None and kind is Change.LEFT:
        # Retiring a record takes it off every gather, and a current read leaves a retired
        # record out: it is told as its tombstone left it, with its retirement.
        found = await _tombstone(context, record_id, item.event.version_after)
    if found is None:
        return None  # not readable (any more): as if it did not exist
    record = Record.from_domain(found, at)
    return WatchChange(change=_KINDS[kind], record=record, cursor=item.cursor)


async def _tombstone(context: Context, record_id: str, version: int | None) -> domain.Record | None:
    """The record as its tombstone, version `version`, left it (None: not readable)."""
    versions = await context.versions(record_id)
    tombstone = next((v for v in versions if v.number == version), None)
    return None if tombstone is None else domain.Record.at_entry(versions[0], tombstone)


_POSITION = "SELECT pg_current_snapshot()::text, coalesce(max(seq), 0) FROM audit_events"


async def _members(
    context: Context, wanted: FeedFilter, progress: Progress
) -> AsyncGenerator[WatchChange, None]:
    """The gather's members as JOINED, read with the feed's position in one snapshot;
    `progress` then lets through only the changes that snapshot could not see."""
    props = [str(p) for p in wanted.match or ()]
    mode = gather_mode.GatherMode.UNION if wanted.union else gather_mode.GatherMode.INTERSECT
    ids: list[str] = []
    async with context.read() as (db, lanes):
        row = await db.fetchrow(_POSITION)
        assert row is not None
        snapshot, newest = feed.Snapshot.parse(row[0]), int(row[1])
        cursor: str | None = None
        while props:
            page = await gather_read.gather(
                db, props, mode, RULE.chosen(lanes, None), None, MAX_PAGE, cursor, count=False
            )
            ids += page.items
            if not page.has_next_page:
                break
            cursor = page.end_cursor
        found = await context.records(ids, None)
    # Every event the snapshot saw is in the members read; only the others come live.
    progress.seen, progress.start = snapshot, 0
    at = str(newest)
    for record_id in ids:
        if record_id in found:
            record = Record.from_domain(found[record_id])
            yield WatchChange(change=WatchChangeKind.JOINED, record=record, cursor=at)
    progress.last = at
