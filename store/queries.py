"""The read path: every query is filtered to the lanes the caller may read."""

from __future__ import annotations

import enum
import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    and_,
    bindparam,
    func,
    literal,
    or_,
    select,
    tuple_,
    union,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from policies.properties import Property, parse_property
from store import tables as t
from store.errors import InvalidInputError
from store.pages import Page, decode_cursor, encode_cursor, page_size
from store.records import AuditEvent, Record, RecordState, Version

MAX_MATCH = 16
ep = t.edge_properties


class GatherMode(enum.Enum):
    INTERSECT = "INTERSECT"
    UNION = "UNION"
    TIMELINE = "TIMELINE"


def _member_at(table: Any, as_of: datetime | BindParameter[Any] | None) -> ColumnElement[bool]:
    if as_of is None:
        current: ColumnElement[bool] = table.c.recorded_to.is_(None)
        return current
    return and_(
        table.c.recorded_from <= as_of,
        or_(table.c.recorded_to.is_(None), table.c.recorded_to > as_of),
    )


# -- records ------------------------------------------------------------------

# Hot statements are built once with named parameters: SQLAlchemy then finds the
# compiled form by a memoized cache key instead of rebuilding and re-keying the
# statement on every call (about a millisecond of CPU per gather).
_RECORDS_BY_ID = select(t.records).where(
    t.records.c.id.in_(bindparam("ids", expanding=True)),
    t.records.c.lane.in_(bindparam("lanes", expanding=True)),
)


async def records_by_id(
    conn: AsyncConnection, ids: Sequence[str], lanes: Sequence[str], as_of: datetime | None = None
) -> dict[str, Record]:
    """Readable records by full id, as they are now or as they were at `as_of`."""
    if not ids:
        return {}
    if as_of is None:
        rows = await conn.execute(_RECORDS_BY_ID, {"ids": list(ids), "lanes": list(lanes)})
        return {row["id"]: Record.from_row(row) for row in rows.mappings()}
    return await _records_as_of(conn, ids, lanes, as_of)


async def _records_as_of(
    conn: AsyncConnection, ids: Sequence[str], lanes: Sequence[str], as_of: datetime
) -> dict[str, Record]:
    led = t.ledger
    # The newest version written by `as_of`, per record (GROUP BY rather than
    # DISTINCT ON, whose SQLAlchemy spelling differs between 2.0 and 2.1).
    newest = (
        select(led.c.object_id, func.max(led.c.version).label("version"))
        .where(and_(led.c.kind == "record", led.c.object_id.in_(list(ids)), led.c.at <= as_of))
        .group_by(led.c.object_id)
        .subquery()
    )
    rows = await conn.execute(
        select(led, t.records.c.created_at, t.records.c.created_by)
        .join(
            newest,
            and_(
                led.c.kind == "record",
                led.c.object_id == newest.c.object_id,
                led.c.version == newest.c.version,
            ),
        )
        .join(t.records, t.records.c.id == led.c.object_id)
        .where(t.records.c.lane.in_(lanes))
    )
    found: dict[str, Record] = {}
    for row in rows.mappings():
        state = RecordState.from_json(row["state"])
        found[row["object_id"]] = Record(
            id=row["object_id"],
            version=row["version"],
            state=state,
            created_at=row["created_at"],
            updated_at=row["at"],
            created_by=row["created_by"],
            ledger_hash=row["hash"],
        )
    return found


async def versions_of(conn: AsyncConnection, record_ids: Sequence[str]) -> dict[str, list[Version]]:
    """Every ledger entry of each record, oldest first (callers check readability)."""
    rows = await conn.execute(
        select(t.ledger)
        .where(t.ledger.c.kind == "record", t.ledger.c.object_id.in_(list(record_ids)))
        .order_by(t.ledger.c.object_id, t.ledger.c.version)
    )
    found: dict[str, list[Version]] = {rid: [] for rid in record_ids}
    for row in rows.mappings():
        found[row["object_id"]].append(Version.from_row(row))
    return found


async def browse(
    conn: AsyncConnection,
    lanes: Sequence[str],
    source_type: str | None,
    first: int | None,
    after: str | None,
) -> Page[str]:
    """Record ids in order of writing, optionally of one source type."""
    size = page_size(first)
    r = t.records
    where: list[ColumnElement[bool]] = [r.c.lane.in_(lanes)]
    if source_type is not None:
        where.append(r.c.source_type == source_type)
    total = (await conn.execute(select(func.count()).where(*where))).scalar_one()
    key = decode_cursor(after, 2)
    if key is not None:
        where.append(tuple_(r.c.created_at, r.c.id) > tuple_(_ts(key[0]), literal(key[1])))
    rows = (
        await conn.execute(
            select(r.c.id, r.c.created_at)
            .where(*where)
            .order_by(r.c.created_at, r.c.id)
            .limit(size + 1)
        )
    ).all()
    return _page([(row[0], [row[1].isoformat(), row[0]]) for row in rows], total, size)


# -- gather -------------------------------------------------------------------


def parse_match(match: Sequence[str]) -> list[Property]:
    if not match:
        raise InvalidInputError("gather needs at least one edge property in match, e.g. org:Acme")
    if len(match) > MAX_MATCH:
        raise InvalidInputError(
            f"gather takes at most {MAX_MATCH} edge properties (got {len(match)})",
            allowed=MAX_MATCH,
        )
    seen: list[Property] = []
    for text in match:
        prop = parse_property(text)
        if prop not in seen:
            seen.append(prop)
    return seen


async def gather(
    conn: AsyncConnection,
    match: Sequence[str],
    mode: GatherMode,
    lanes: Sequence[str],
    as_of: datetime | None,
    first: int | None,
    after: str | None,
) -> Page[str]:
    """Record ids on every (INTERSECT) or any (UNION, TIMELINE) of the edge properties.

    INTERSECT and UNION list records by id; TIMELINE lists them by when each joined
    the edge (the start of its membership). The adjustment label stays out of set
    operations.
    """
    size = page_size(first)
    props = [p for p in parse_match(match) if p.label != "e_adjustment"]
    if not props:
        return Page([], 0, False, None)
    params: dict[str, Any] = {"lanes": list(lanes), "limit": size + 1}
    for n, prop in enumerate(props):
        params[f"label_{n}"] = prop.label
        params[f"value_{n}"] = prop.value
    if as_of is not None:
        params["as_of"] = as_of
    if mode is GatherMode.TIMELINE:
        joined = _joined(len(props), as_of is not None)
        base = select(joined.c.record_id, joined.c.joined)
        total = (await conn.execute(select(func.count()).select_from(joined), params)).scalar_one()
        key = decode_cursor(after, 2)
        if key is not None:
            base = base.where(
                tuple_(joined.c.joined, joined.c.record_id) > tuple_(_ts(key[0]), literal(key[1]))
            )
        rows = (
            await conn.execute(
                base.order_by(joined.c.joined, joined.c.record_id).limit(size + 1), params
            )
        ).all()
        return _page([(row[0], [row[1].isoformat(), row[0]]) for row in rows], total, size)
    key = decode_cursor(after, 1)
    if key is not None:
        params["after"] = key[0]
    count, page = _set_statements(len(props), mode, as_of is not None, key is not None)
    total = (await conn.execute(count, params)).scalar_one()
    rows = (await conn.execute(page, params)).all()
    return _page([(row[0], [row[0]]) for row in rows], total, size)


@functools.cache
def _set_statements(count: int, mode: GatherMode, at: bool, after: bool) -> tuple[Any, Any]:
    """The count and page statements of an INTERSECT or UNION of `count` properties."""
    members = _members(count, mode, at)
    page = select(members.c.record_id)
    if after:
        page = page.where(members.c.record_id > bindparam("after"))
    page = page.order_by(members.c.record_id).limit(bindparam("limit"))
    return select(func.count()).select_from(members), page


@functools.cache
def _joined(count: int, at: bool) -> Any:
    """Records carrying any of `count` properties, each with when it joined one of them."""
    as_of = bindparam("as_of", type_=t.TZ) if at else None
    lanes: BindParameter[Any] = bindparam("lanes", expanding=True)
    carried = or_(
        *(
            and_(ep.c.label == bindparam(f"label_{n}"), ep.c.value == bindparam(f"value_{n}"))
            for n in range(count)
        )
    )
    return (
        select(ep.c.record_id, func.min(ep.c.recorded_from).label("joined"))
        .where(carried, ep.c.lane.in_(lanes), _member_at(ep, as_of))
        .group_by(ep.c.record_id)
        .subquery()
    )


@functools.cache
def _members(count: int, mode: GatherMode, at: bool) -> Any:
    """A subquery of distinct record ids carrying every / any of `count` properties.

    Parameters: label_<n>, value_<n>, lanes (a list) and, when `at`, as_of. The
    statement depends only on this shape, so it is built once per shape.
    """
    as_of = bindparam("as_of", type_=t.TZ) if at else None
    lanes: BindParameter[Any] = bindparam("lanes", expanding=True)
    if mode is GatherMode.INTERSECT:
        # A chain of self-joins lets the planner probe the rarer properties'
        # index entries instead of reading every member of a popular one.
        first = ep.alias("m0")
        query = select(first.c.record_id).where(
            first.c.label == bindparam("label_0"),
            first.c.value == bindparam("value_0"),
            first.c.lane.in_(lanes),
            _member_at(first, as_of),
        )
        for n in range(1, count):
            other = ep.alias(f"m{n}")
            query = query.join(
                other,
                and_(
                    other.c.record_id == first.c.record_id,
                    other.c.label == bindparam(f"label_{n}"),
                    other.c.value == bindparam(f"value_{n}"),
                    other.c.lane == first.c.lane,
                    _member_at(other, as_of),
                ),
            )
        # A record leaves and re-joins an edge over time; as of one instant it is
        # a member at most once, but DISTINCT keeps that an invariant of the query.
        return query.distinct().subquery()
    parts = [
        select(ep.c.record_id).where(
            ep.c.label == bindparam(f"label_{n}"),
            ep.c.value == bindparam(f"value_{n}"),
            ep.c.lane.in_(lanes),
            _member_at(ep, as_of),
        )
        for n in range(count)
    ]
    return union(*parts).subquery() if count > 1 else parts[0].distinct().subquery()


# -- labels and hyperedges ---------------------------------------------------


async def edge_property_members(
    conn: AsyncConnection,
    prop: Property,
    lanes: Sequence[str],
    as_of: datetime | None,
    first: int | None,
    after: str | None,
) -> Page[str]:
    return await gather(conn, [str(prop)], GatherMode.UNION, lanes, as_of, first, after)


async def member_counts(
    conn: AsyncConnection, props: Sequence[Property], lanes: Sequence[str], as_of: datetime | None
) -> dict[Property, int]:
    """How many readable records carry each property, in one query."""
    rows = await conn.execute(
        select(ep.c.label, ep.c.value, func.count(ep.c.record_id.distinct()))
        .where(
            tuple_(ep.c.label, ep.c.value).in_([(p.label, p.value) for p in props]),
            ep.c.lane.in_(lanes),
            _member_at(ep, as_of),
            # Adjustment chains are shown under a record's adjustments, never as hyperedges.
            ep.c.label != "e_adjustment",
        )
        .group_by(ep.c.label, ep.c.value)
    )
    return {Property(row[0], row[1]): row[2] for row in rows}


# -- audit --------------------------------------------------------------------


def _event_visible(lanes: Sequence[str]) -> ColumnElement[bool]:
    # Events with no lane (policy changes) concern everyone.
    return or_(t.audit_events.c.lane.in_(lanes), t.audit_events.c.lane.is_(None))


async def audit(
    conn: AsyncConnection,
    lanes: Sequence[str],
    record_id: str | None,
    kinds: Sequence[str] | None,
    first: int | None,
    after: str | None,
) -> Page[AuditEvent]:
    """Audit events in feed order (newest last)."""
    size = page_size(first)
    ev = t.audit_events
    where: list[ColumnElement[bool]] = [_event_visible(lanes)]
    if record_id is not None:
        where.append(ev.c.record_id == record_id)
    if kinds:
        where.append(ev.c.kind.in_(list(kinds)))
    total = (await conn.execute(select(func.count()).select_from(ev).where(*where))).scalar_one()
    if after is not None:
        where.append(ev.c.seq > feed_position(after))
    rows = await conn.execute(select(ev).where(*where).order_by(ev.c.seq).limit(size + 1))
    events = [AuditEvent.from_row(row) for row in rows.mappings()]
    return _page([(e, [e.seq]) for e in events], total, size, plain=True)


def feed_position(cursor: str) -> int:
    """An audit cursor is the event's position in the feed, as a decimal string."""
    if not cursor.isdigit() or len(cursor) > 18:
        raise InvalidInputError(
            f"cursor '{cursor[:40]}' is not an audit cursor; pass an event's cursor or endCursor"
        )
    return int(cursor)


async def audit_event(
    conn: AsyncConnection, event_id: str, lanes: Sequence[str]
) -> AuditEvent | None:
    ev = t.audit_events
    row = (
        (await conn.execute(select(ev).where(ev.c.id == event_id, _event_visible(lanes))))
        .mappings()
        .one_or_none()
    )
    return None if row is None else AuditEvent.from_row(row)


async def version(conn: AsyncConnection, record_id: str, number: int) -> Version | None:
    row = (
        (
            await conn.execute(
                select(t.ledger).where(
                    t.ledger.c.kind == "record",
                    t.ledger.c.object_id == record_id,
                    t.ledger.c.version == number,
                )
            )
        )
        .mappings()
        .one_or_none()
    )
    return None if row is None else Version.from_row(row)


# -- helpers ------------------------------------------------------------------


def _ts(value: Any) -> Any:
    try:
        return literal(datetime.fromisoformat(str(value)))
    except ValueError as exc:
        raise InvalidInputError("that cursor is not one this list gave out") from exc


def _page(
    rows: Sequence[tuple[Any, list[Any]]], total: int, size: int, plain: bool = False
) -> Page[Any]:
    items = [item for item, _ in rows[:size]]
    has_next = len(rows) > size
    end = None
    if rows[:size]:
        last_key = rows[:size][-1][1]
        end = str(last_key[0]) if plain else encode_cursor(last_key)
    return Page(items, total, has_next, end)
