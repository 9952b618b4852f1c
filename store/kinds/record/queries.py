"""The read path: every query is filtered to the lanes the caller may read.

Each function runs fixed-text statements on a `Reader` (a snapshot, or a plain
asyncpg connection); lists go in as array parameters. A page and its total count
come from one statement, and the count is computed only when the caller asks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from policies.properties import Property, parse_property
from store.errors import InvalidInputError, ResponseTooLargeError
from store.kinds.record import counts
from store.kinds.record.model import Record, RecordState, Version
from store.kinds.record.resolve import readable_sql, version_at_sql
from store.reads.gather_mode import GatherMode
from store.reads.pages import Page, encode_cursor
from store.reads.snapshot import Reader
from store.reads.statements import Params
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


# -- labels and hyperedges ---------------------------------------------------


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


def keyed_page(rows: Sequence[asyncpg.Record], size: int, count: bool, by_time: bool) -> Page[str]:
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
