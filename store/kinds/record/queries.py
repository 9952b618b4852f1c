"""The read path: every query is filtered to the lanes the caller may read.

Each function runs fixed-text statements on a `Reader` (a snapshot, or a plain
asyncpg connection); lists go in as array parameters. A page and its total count
come from one statement, and the count is computed only when the caller asks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from policies.properties import Property, parse_property
from store.errors import InvalidInputError, ResponseTooLargeError
from store.kinds.record import counts
from store.kinds.record.model import Record, RecordState, Version
from store.kinds.record.names import named, named_count, normal_name
from store.kinds.record.resolve import readable_sql, version_at_sql
from store.kinds.record.tags import normal_tag, tagged, tagged_count
from store.reads.pages import Page, encode_cursor, id_cursor, page_size, time_cursor
from store.reads.shape import GatherMode, Shape
from store.reads.snapshot import Reader
from store.reads.statements import PageSql, Params, Statement, page_rows
from store.reads.visibility import RULE

MAX_MATCH = 16
RECORD_COLUMNS = (
    "id, lane, source_type, authority, content, properties, version, created_at, "
    "updated_at, created_by, ledger_hash, expires_at"
)
LEDGER_COLUMNS = "object_id, version, event, actor, at, policy_version, state, hash"


def carries(alias: str, label: str, value: str) -> str:
    """SQL: the membership row `alias` is of the property (label, value), as an index
    condition: the indexes hold each value's key (store.tables), not the value."""
    return f"{alias}.label = {label} AND {alias}.value_key = edgeloom_value_key({value})"


# -- records ------------------------------------------------------------------

DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024


@dataclass
class ContentBudget:
    """The bytes of record content one response may carry, and what it carries so far.

    Content counts each time the response carries it (`spend`), so aliases that read
    the same records count each. The reads below are given what is left: PostgreSQL
    sums the content sizes of a batch (`octet_length`, known without sending the
    values) and sends the content only when the batch fits, so a read that would pass
    the limit is refused before its content leaves the database.
    """

    limit: int
    used: int = 0
    refused: bool = False

    @property
    def left(self) -> int:
        return self.limit - self.used

    def refuse(self) -> ResponseTooLargeError:
        self.refused = True
        return ResponseTooLargeError(self.limit)

    def check(self) -> None:
        """Refuses a read once the response is refused, before it runs."""
        if self.refused:
            raise ResponseTooLargeError(self.limit)

    def fits(self, rows: Sequence[asyncpg.Record]) -> None:
        """Refuses a batch read whose content (`batch_bytes`) was not sent for want of room."""
        if rows and rows[0]["batch_bytes"] is not None and rows[0]["batch_bytes"] > self.left:
            raise self.refuse()

    def spend(self, texts: Iterable[str]) -> None:
        """Counts the content the response carries (UTF-8 bytes); refuses once over."""
        for text in texts:
            self.used += len(text) if text.isascii() else len(text.encode())
        if self.used > self.limit:
            raise self.refuse()


_UNBOUNDED = ContentBudget(limit=1 << 62)

# The content of each row only when the whole batch fits in what is left ($3). Each id
# is a probe of the primary key (a lateral subquery, kept apart by OFFSET 0): with
# `id = ANY(...)` and tables not yet analyzed (right after a bulk load) the planner
# scanned a whole lane, or skip-scanned the (lane, created_at, id) index, instead.
_RECORDS_BY_ID = f"""
SELECT {RECORD_COLUMNS.replace("content, ", "")},
       sum(octet_length(content)) OVER () AS batch_bytes,
       CASE WHEN sum(octet_length(content)) OVER () <= $3 THEN content END AS content
FROM (SELECT DISTINCT unnest($1::text[]) AS key) asked
CROSS JOIN LATERAL (SELECT * FROM records WHERE id = asked.key OFFSET 0) records
WHERE {readable_sql("", "$2::text[]", None)}
"""
# The newest version written by `as_of`, per record (`version_at_sql`, a probe of the
# ledger by object id); readable by its current lane, and left out when that version is
# a tombstone (the record was retired then).
_RECORDS_AS_OF = f"""
SELECT r.id AS object_id, rv.version, rv.at, rv.hash, r.created_at, r.created_by,
       sum(octet_length(rv.state->>'content')) OVER () AS batch_bytes,
       CASE WHEN sum(octet_length(rv.state->>'content')) OVER () <= $4 THEN rv.state END AS state
FROM (SELECT DISTINCT unnest($1::text[]) AS key) asked
CROSS JOIN LATERAL (SELECT * FROM records WHERE id = asked.key OFFSET 0) r
{version_at_sql("r", "$3")}
WHERE {readable_sql("r", "$2::text[]", "$3")}
"""


def versions_sql(v: str, record_id: str, up_to: str | None = None) -> str:
    """SQL: the ledger entries (as `{v}`) of the record `record_id` (an SQL expression),
    those up to version `up_to` if given: what `Record.versions` shows, on both read
    paths (the caller orders them by version)."""
    upto = "" if up_to is None else f" AND {v}.version <= {up_to}"
    where = f"{v}.kind = 'record' AND {v}.object_id = {record_id}{upto}"
    return f"SELECT {v}.* FROM ledger {v} WHERE {where}"


# Callers are shown only the versions of records they may read, checked here too. They
# are read only for a record a read has shown (now, or as it was at an earlier instant),
# so a record retired since still shows the versions up to the one shown.
_VERSIONS_OF = f"""
SELECT {", ".join(f"l.{c}" for c in LEDGER_COLUMNS.split(", ") if c != "state")},
       sum(octet_length(l.state->>'content')) OVER () AS batch_bytes,
       CASE WHEN sum(octet_length(l.state->>'content')) OVER () <= $3 THEN l.state END AS state
FROM records r CROSS JOIN LATERAL ({versions_sql("l", "r.id")}) l
WHERE r.id = ANY($1::text[]) AND {RULE.lane("r", "$2::text[]")}
ORDER BY l.object_id, l.version
"""


async def records_by_id(
    db: Reader,
    ids: Sequence[str],
    lanes: Sequence[str],
    as_of: datetime | None = None,
    budget: ContentBudget = _UNBOUNDED,
) -> dict[str, Record]:
    """Readable records by full id, as they are now or as they were at `as_of`; refused,
    their content unread, when it does not fit in what is left of `budget`."""
    if not ids:
        return {}
    budget.check()
    if as_of is None:
        rows = await db.fetch(_RECORDS_BY_ID, list(ids), list(lanes), budget.left)
        budget.fits(rows)
        return {row["id"]: Record.from_row(row) for row in rows}
    rows = await db.fetch(_RECORDS_AS_OF, list(ids), list(lanes), as_of, budget.left)
    budget.fits(rows)
    return {
        row["object_id"]: Record(
            id=row["object_id"],
            version=row["version"],
            state=RecordState.from_json(row["state"]),
            created_at=row["created_at"],
            updated_at=row["at"],
            created_by=row["created_by"],
            ledger_hash=row["hash"],
        )
        for row in rows
    }


async def versions_of(
    db: Reader,
    record_ids: Sequence[str],
    lanes: Sequence[str],
    budget: ContentBudget = _UNBOUNDED,
) -> dict[str, list[Version]]:
    """Every ledger entry of each readable record, oldest first; refused as in
    `records_by_id` when their content does not fit in what is left of `budget`."""
    budget.check()
    rows = await db.fetch(_VERSIONS_OF, list(record_ids), list(lanes), budget.left)
    budget.fits(rows)
    found: dict[str, list[Version]] = {rid: [] for rid in record_ids}
    for row in rows:
        found[row["object_id"]].append(Version.from_row(row))
    return found


def bind_records(
    values: dict[str, Any],
    prefix: str,
    lanes: Sequence[str],
    source_type: str | None,
    after: str | None,
    tag: str | None,
    name: str | None = None,
) -> Shape:
    """Put the values `records_sql` takes in `values` (each name after `prefix`), refusing
    a cursor this list did not give, and say its shape."""
    key = time_cursor(after)
    # Each lane is read on its own (unnest): once each.
    values[prefix + "lanes"] = list(dict.fromkeys(lanes))
    values[prefix + "source_type"] = source_type
    values[prefix + "tag"] = None if tag is None else normal_tag(tag)
    values[prefix + "named"] = None if name is None else normal_name(name)
    if key is not None:
        values[prefix + "after_at"], values[prefix + "after_id"] = key
    return Shape(
        after=key is not None,
        source_type=source_type is not None,
        tag=tag is not None,
        named=name is not None,
    )


def records_sql(p: Params, shape: Shape, whole_rows: bool = False) -> PageSql:
    """SQL: the records of `lanes` in order of writing (created_at, id), optionally of one
    source type, holding a tag or having a name (a title or an alias); each row its id and
    created_at, or with `whole_rows` the whole `records` row."""
    lanes = p("lanes", "text[]")
    where = f"AND q.source_type = {p('source_type')}" if shape.source_type else ""
    if shape.tag:
        where += f" AND {tagged('q', p('tag'))}"
    if shape.named:
        where += f" AND {named('q', p('named'))}"
    keyed = ""
    if shape.after:
        keyed = f"AND (q.created_at, q.id) > ({p('after_at', 'timestamptz')}, {p('after_id')})"
    limit = p("limit")
    columns = "q.*" if whole_rows else "q.id, q.created_at"
    # Each lane's first rows come from the (lane, created_at, id) index in order;
    # the merged top rows of all lanes are the page, without sorting whole lanes.
    page = f"""SELECT pg.* FROM unnest({lanes}) AS l(lane)
        CROSS JOIN LATERAL (SELECT {columns} FROM records q
          WHERE {RULE.record_in_lane("q", "l.lane")} {where} {keyed}
          ORDER BY q.created_at, q.id LIMIT {limit}) pg
        ORDER BY pg.created_at, pg.id LIMIT {limit}"""
    # The count the write path keeps for the lanes (and source type): a few rows; a
    # tag's (or a name's) records are counted from its index (no count is kept of them).
    kind = p("source_type") if shape.source_type else None
    tag = p("tag") if shape.tag else None
    if shape.named:
        count = named_count(lanes, p("named"), kind, tag)
    elif tag is not None:
        count = tagged_count(lanes, tag, kind)
    else:
        count = counts.records_count(lanes, kind)
    return PageSql(page, count)


@functools.cache
def _browse_statement(shape: Shape, count: bool) -> Statement:
    p = Params()
    return page_rows(p, records_sql(p, shape), count)


async def browse(
    db: Reader,
    lanes: Sequence[str],
    source_type: str | None,
    first: int | None,
    after: str | None,
    count: bool = True,
    tag: str | None = None,
    name: str | None = None,
) -> Page[str]:
    """Record ids in order of writing, optionally of one source type, holding a tag, or
    having a name (a title or an alias)."""
    size = page_size(first)
    values: dict[str, Any] = {"limit": size + 1}
    shape = bind_records(values, "", lanes, source_type, after, tag, name)
    statement = _browse_statement(shape, count)
    rows = await db.fetch(statement.text, *statement.args(values))
    return _keyed_page(rows, size, count, by_time=True)


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


def gather_properties(match: Sequence[str]) -> list[Property]:
    """The distinct properties of `match`; the adjustment label stays out of set operations."""
    return RULE.shown(parse_match(match))


def bind_properties(values: dict[str, Any], prefix: str, props: Sequence[Property]) -> None:
    """Put a gather's properties in `values` as the builders below take them: the n-th
    as label_<n> and value_<n>, each name after `prefix`."""
    for n, prop in enumerate(props):
        values[f"{prefix}label_{n}"], values[f"{prefix}value_{n}"] = prop.label, prop.value


def carries_nth(p: Params, alias: str, n: int) -> str:
    """SQL: the membership row `alias` is of the n-th property (`bind_properties`)."""
    return carries(alias, p(f"label_{n}"), p(f"value_{n}"))


def carries_any(p: Params, alias: str, ns: Iterable[int]) -> str:
    """SQL: the membership row `alias` is of one of the properties numbered `ns`."""
    return " OR ".join(f"({carries_nth(p, alias, n)})" for n in ns) or "false"


def on_gather(p: Params, record: str, count: int, union: bool, held: Callable[[str], str]) -> str:
    """SQL: the record `record` carries every one (any one, with `union`) of `count`
    properties in membership rows meeting `held(alias)`: whether it is on the gather."""
    joiner = " OR " if union else " AND "
    each = joiner.join(
        f"""EXISTS (SELECT 1 FROM edge_properties m WHERE m.record_id = {record}
            AND {carries_nth(p, "m", n)} AND {held("m")})"""
        for n in range(count)
    )
    return f"({each or 'false'})"


def members_sql(p: Params, count: int, mode: GatherMode, at: bool) -> str:
    """SQL: distinct record ids carrying every (INTERSECT) or any (UNION, TIMELINE) of
    `count` properties, bound as label_<n>/value_<n>, in the lanes `lanes`, at `as_of`."""
    lanes = p("lanes", "text[]")
    as_of = p("as_of", "timestamptz") if at else None
    if mode is GatherMode.INTERSECT:
        # A chain of self-joins lets the planner probe the rarer properties' index
        # entries instead of reading every member of a popular one. Each joined side
        # names the caller's lanes too: when the planner hashes it rather than probing
        # per record, the lane is still the index's leading condition, not a scan of
        # every lane's members of the value.
        joins = " ".join(
            f"""JOIN edge_properties m{n} ON m{n}.record_id = m0.record_id
                AND {carries_nth(p, f"m{n}", n)}
                AND {RULE.in_lane(f"m{n}", "m0.lane")}
                AND {RULE.member(f"m{n}", lanes, as_of)}"""
            for n in range(1, count)
        )
        # A record leaves and re-joins an edge over time; as of one instant it is a
        # member at most once, but DISTINCT keeps that an invariant of the query.
        return f"""SELECT DISTINCT m0.record_id FROM edge_properties m0 {joins}
            WHERE {carries_nth(p, "m0", 0)} AND {RULE.member("m0", lanes, as_of)}"""
    if mode is GatherMode.TIMELINE:
        # Each record once, with when it joined one of the edges: the timeline's order.
        return f"""SELECT m.record_id, min(m.recorded_from) AS joined FROM edge_properties m
            WHERE ({carries_any(p, "m", range(count))}) AND {RULE.member("m", lanes, as_of)}
            GROUP BY m.record_id"""
    parts = [
        f"""SELECT m.record_id FROM edge_properties m
            WHERE {carries_nth(p, "m", n)} AND {RULE.member("m", lanes, as_of)}"""
        for n in range(count)
    ]
    if count == 1:
        return parts[0].replace("SELECT m.record_id", "SELECT DISTINCT m.record_id", 1)
    return " UNION ".join(parts)


def one_value_page(p: Params, at: bool, after: bool) -> str:
    """SQL: a page of the records carrying one property (label_0/value_0), in record
    order: each lane's first members straight from the membership index, in order, and
    the merged top of them, so a page reads `limit` index entries a lane however many
    records carry the value (its count is the one the write path keeps)."""
    as_of = p("as_of", "timestamptz") if at else None
    keyed = f"AND m.record_id > {p('after_id')}" if after else ""
    limit = p("limit")
    # DISTINCT: as of one instant a record holds a value at most once, but the query
    # keeps that an invariant, as `members_sql` does; and a lane named twice reads once.
    return f"""SELECT DISTINCT pg.id FROM unnest({p("lanes", "text[]")}) AS l(lane)
        CROSS JOIN LATERAL (
          SELECT DISTINCT m.record_id AS id FROM edge_properties m
          WHERE {RULE.in_lane("m", "l.lane")} AND {carries_nth(p, "m", 0)}
          AND {RULE.held("m", as_of)} AND {RULE.unexpired("m.record_id", as_of)} {keyed}
          ORDER BY 1 LIMIT {limit}
        ) pg ORDER BY 1 LIMIT {limit}"""


def bind_gather(
    values: dict[str, Any],
    prefix: str,
    match: Sequence[str],
    mode: GatherMode,
    lanes: Sequence[str],
    as_of: datetime | None,
    after: str | None,
) -> Shape:
    """Check a gather's arguments (refusing what is wrong, naming it), put the values
    `gather_sql` takes in `values` (each name after `prefix`), and say its shape; no
    properties when `match` leaves none to combine (only the engine's labels)."""
    props = gather_properties(match)
    values[prefix + "lanes"] = list(lanes)
    values[prefix + "as_of"] = as_of
    if not props:
        return Shape(properties=0)
    bind_properties(values, prefix, props)
    if mode is GatherMode.TIMELINE:
        keyed = time_cursor(after)
        paged = keyed is not None
        if keyed is not None:
            values[prefix + "after_at"], values[prefix + "after_id"] = keyed
    else:
        after_id = id_cursor(after)
        paged = after_id is not None
        if after_id is not None:
            values[prefix + "after_id"] = after_id
    return Shape(as_of=as_of is not None, after=paged, mode=mode, properties=len(props))


def gather_sql(p: Params, shape: Shape, members: str = "members") -> PageSql:
    """SQL: a gather's page (rows id, and for TIMELINE created_at: when the record joined)
    in its order, and its count, over the CTE `members` (`members_sql`)."""
    if shape.properties == 0:
        return PageSql("SELECT NULL::text AS id WHERE false", "SELECT 0")
    limit = p("limit")
    if shape.mode is GatherMode.TIMELINE:
        keyed = ""
        if shape.after:
            keyed = (
                f"AND (m.joined, m.record_id) > ({p('after_at', 'timestamptz')}, {p('after_id')})"
            )
        # Keyed by joining time, under the column name the page reader takes times from.
        page = f"""SELECT m.record_id AS id, m.joined AS created_at FROM {members} m
            WHERE true {keyed} ORDER BY m.joined, m.record_id LIMIT {limit}"""
    elif shape.properties == 1:
        page = one_value_page(p, shape.as_of, shape.after)
    else:
        keyed = f"WHERE m.record_id > {p('after_id')}" if shape.after else ""
        page = f"SELECT m.record_id AS id FROM {members} m {keyed} ORDER BY 1 LIMIT {limit}"
    if shape.properties == 1 and not shape.as_of:
        # One value's current members: the count the write path keeps.
        count = counts.member_count(p("label_0"), p("value_0"), p("lanes", "text[]"))
    else:
        count = f"SELECT count(*) FROM {members}"
    found = members_sql(p, shape.properties, shape.mode, shape.as_of)
    return PageSql(page, count, f"{members} AS ({found})")


@functools.cache
def _gather_statement(shape: Shape, with_total: bool) -> Statement:
    p = Params()
    return page_rows(p, gather_sql(p, shape), with_total)


async def gather(
    db: Reader,
    match: Sequence[str],
    mode: GatherMode,
    lanes: Sequence[str],
    as_of: datetime | None,
    first: int | None,
    after: str | None,
    count: bool = True,
) -> Page[str]:
    """Record ids on every (INTERSECT) or any (UNION, TIMELINE) of the edge properties.

    INTERSECT and UNION list records by id; TIMELINE lists them by when each joined
    one of the edges. The adjustment label stays out of set operations.
    """
    size = page_size(first)
    values: dict[str, Any] = {"limit": size + 1}
    shape = bind_gather(values, "", match, mode, lanes, as_of, after)
    if not shape.properties:
        return Page([], 0 if count else None, False, None)
    statement = _gather_statement(shape, count)
    rows = await db.fetch(statement.text, *statement.args(values))
    return _keyed_page(rows, size, count, by_time=mode is GatherMode.TIMELINE)


# -- labels and hyperedges ---------------------------------------------------


def members_shape(as_of: bool, after: bool) -> Shape:
    """The shape of one property's members (label_0, value_0), by id: a one-value gather."""
    return Shape(as_of=as_of, after=after, mode=GatherMode.UNION, properties=1)


async def members(
    db: Reader,
    prop: Property,
    lanes: Sequence[str],
    as_of: datetime | None,
    first: int | None,
    after: str | None,
    count: bool = True,
) -> Page[str]:
    """The readable records carrying `prop` now (or at `as_of`), by id, a page at a time:
    the members of a hyperedge or of an asserted edge (a group)."""
    size = page_size(first)
    key = id_cursor(after)
    values: dict[str, Any] = {"lanes": list(lanes), "as_of": as_of, "after_id": key}
    values["limit"] = size + 1
    bind_properties(values, "", [prop])
    statement = _gather_statement(members_shape(as_of is not None, key is not None), count)
    rows = await db.fetch(statement.text, *statement.args(values))
    return _keyed_page(rows, size, count, by_time=False)


def member_count_sql(label: str, value: str, lanes: str, as_of: str | None, m: str = "m") -> str:
    """SQL: how many records of the lanes `lanes` carry `label`:`value` (SQL expressions)
    now, or at `as_of`; a label never shown as a hyperedge has none."""
    if as_of is None:
        # Now: the counts the write path keeps, one lookup.
        return counts.member_count(label, value, lanes)
    return (
        f"SELECT count(DISTINCT {m}.record_id) FROM edge_properties {m} "
        f"WHERE {carries(m, label, value)} AND {RULE.member(m, lanes, as_of)} "
        f"AND {RULE.shown_label(f'{m}.label')}"
    )


_MEMBER_COUNTS_NOW = f"""
SELECT u.l, u.v, ({member_count_sql("u.l", "u.v", "$3::text[]", None)})
FROM unnest($1::text[], $2::text[]) AS u(l, v)
"""
_MEMBER_COUNTS_AT = f"""
SELECT u.l, u.v, ({member_count_sql("u.l", "u.v", "$3::text[]", "$4")})
FROM unnest($1::text[], $2::text[]) AS u(l, v)
"""


async def member_counts(
    db: Reader, props: Sequence[Property], lanes: Sequence[str], as_of: datetime | None
) -> dict[Property, int]:
    """How many readable records carry each property, in one query."""
    args: list[Any] = [[p.label for p in props], [p.value for p in props], list(lanes)]
    if as_of is None:
        rows = await db.fetch(_MEMBER_COUNTS_NOW, *args)
    else:
        rows = await db.fetch(_MEMBER_COUNTS_AT, *args, as_of)
    return {Property(row[0], row[1]): row[2] for row in rows}


# -- helpers ------------------------------------------------------------------


def _keyed_page(rows: Sequence[asyncpg.Record], size: int, count: bool, by_time: bool) -> Page[str]:
    """A page from rows (total, id[, created_at]); a lone row with a NULL id means empty."""
    total = rows[0]["total"] if rows and count else None
    found = [row for row in rows if row["id"] is not None]
    items = found[:size]
    end = None
    if items:
        last = items[-1]
        end = encode_cursor(
            [last["created_at"].isoformat(), last["id"]] if by_time else [last["id"]]
        )
    return Page([row["id"] for row in items], total, len(found) > size, end)
