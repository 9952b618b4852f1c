"""The feed's replay: the events after a cursor visible in the snapshot a subscription
took, a page at a time, up to where the live feed (`store.feed.live`) takes over
(docs/feed.md: the replay's seam with the live feed)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from sqlalchemy import Executable, Text, bindparam, cast, func, select
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.types import UserDefinedType

from store import tables as t
from store.errors import InvalidInputError
from store.feed import filters
from store.feed.filters import FeedFilter
from store.feed.live import FeedEvent, Snapshot, with_memberships, with_named
from store.reads import lane_floor
from store.reads.pages import position_cursor
from store.reads.visibility import CORE_LANES, RULE, core

REPLAY_PAGE = 500


class _PgSnapshot(UserDefinedType[str]):
    cache_ok = True

    def get_col_spec(self, **kw: object) -> str:
        return "pg_snapshot"


async def take_snapshot(engine: AsyncEngine) -> Snapshot:
    """The database's snapshot now (taken on a pooled connection; reads only)."""
    async with engine.connect() as conn:
        text = (await conn.execute(select(cast(func.pg_current_snapshot(), Text)))).scalar_one()
    return Snapshot.parse(text)


async def check_cursor(engine: AsyncEngine, cursor: str) -> int:
    """The feed position a resume cursor names; refuses one that names no event.

    "0" is the position before the first event. A cursor of an event the caller
    may no longer read is still accepted: a position is not a record.
    """
    position = position_cursor(cursor)
    if position == 0:
        return 0
    ev = t.audit_events
    async with engine.connect() as conn:
        # Positions are one sequence over every lane (docs/security.md): the gateway's
        # own check, as the crossing role.
        await lane_floor.on_core(conn, lane_floor.CROSSING)
        newest, exists = (
            await conn.execute(
                select(
                    func.coalesce(select(func.max(ev.c.seq)).scalar_subquery(), 0),
                    select(ev.c.seq).where(ev.c.seq == position).exists(),
                )
            )
        ).one()
    if position > newest:
        raise InvalidInputError(
            f"cursor '{cursor}' is past the newest event in the feed (cursor '{newest}'); "
            "pass the cursor of an event you received"
        )
    if not exists:
        raise InvalidInputError(
            f"cursor '{cursor}' names no event in the feed; "
            "pass the cursor of an event you received"
        )
    return position


async def replay(
    engine: AsyncEngine,
    after: int,
    snapshot: Snapshot,
    lanes: Callable[[], Awaitable[Sequence[str]]],
    kinds: Sequence[str],
    page: int = REPLAY_PAGE,
    wanted: FeedFilter | None = None,
) -> AsyncIterator[list[FeedEvent]]:
    """Pages of the events after `after` visible in `snapshot`, in seq order, their
    payloads as a reader of those lanes may see them; with `wanted`, only the events
    it admits (read by index: `filters.replay_text`).

    `lanes` is awaited before each page for the lanes readable then, so rights
    that narrow during a long replay apply to the rest of it. Each page is its own
    short statement; the snapshot keeps the pages one consistent view.
    """
    ev = t.audit_events
    as_text = snapshot.as_text()
    position = after
    while True:
        readable: Sequence[str] = await lanes()
        query = (
            select(ev)
            .where(
                ev.c.seq > position,
                # Bound as text: asyncpg would encode a pg_snapshot parameter as a tuple.
                func.pg_visible_in_snapshot(
                    ev.c.txid, cast(bindparam("snapshot", as_text, type_=Text), _PgSnapshot)
                ),
                core(RULE.event(ev.name, CORE_LANES), lanes=list(readable)),
                ev.c.kind.in_(list(kinds)),
            )
            .order_by(ev.c.seq)
            .limit(page)
        )
        if wanted is not None and wanted.actors is not None:
            query = query.where(ev.c.actor.in_(sorted(wanted.actors)))
        statement: Executable = query
        if wanted is not None and wanted.about_records:
            statement = _filtered(wanted, position, as_text, readable, kinds, page)
        async with engine.connect() as conn:
            await lane_floor.on_core(conn, lane_floor.Lanes.of(readable))
            rows = (await conn.execute(statement)).mappings().all()
            events = [FeedEvent.from_row(r) for r in rows]
            if events:
                # The page's own connection and transaction, through asyncpg's interface.
                driver = (await conn.get_raw_connection()).driver_connection
                assert driver is not None
                events = await with_named(driver, events)
                if wanted is not None and wanted.needs_memberships:
                    events = await with_memberships(driver, events)
        if not rows:
            return
        seen = frozenset(readable)
        position = events[-1].seq
        events = [e.for_reader(seen) for e in events]
        if wanted is not None and wanted.record_ids is not None:
            # A payload naming a record the reader may not read does not make it wanted.
            events = [e for e in events if wanted.names(e.event)]
        yield events
        if len(rows) < page:
            return


_FILTERED_COLUMNS = (
    "e.seq, e.id, e.kind, e.record_id, e.lane, e.actor, e.at, e.payload, e.version_before, "
    "e.version_after, e.object_kind, e.txid::text::bigint AS txid"
)
_FILTERED_COMMON = f"""e.seq > :position
    AND pg_visible_in_snapshot(e.txid, CAST(:snapshot AS pg_snapshot))
    AND {RULE.event("e", CORE_LANES)} AND e.kind = ANY(CAST(:kinds AS text[]))"""


def _filtered(
    wanted: FeedFilter,
    position: int,
    snapshot: str,
    readable: Sequence[str],
    kinds: Sequence[str],
    page: int,
) -> Executable:
    """A replay page of the events `wanted` admits (`filters.replay_text`)."""
    sql = filters.replay_text(wanted, _FILTERED_COLUMNS, _FILTERED_COMMON)
    values = wanted.sql("e", CORE_LANES).values
    bound = sql_text(sql).bindparams(
        position=position,
        snapshot=snapshot,
        lanes=list(readable),
        kinds=list(kinds),
        page=page,
        **values,
    )
    return bound.columns(payload=JSONB)
