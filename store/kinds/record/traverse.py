"""Traverse: breadth first from one record over the edges it shares and the typed edges
that join it to others.

Every edge property is walked the same way: the caller's labels (imputed edges) and the
engine's connections, groups and adjustment chains (asserted edges). Typed edges
(written by hand, or detected by intake as links) are walked either way, each one a step
to the record at its other end (from a note's record, its sections' links too), seen
under the same rule as every read of them (both ends readable and not retired, valid at
the instant read). One statement per hop reads the frontier's memberships and typed
edges by record id, sizes each value with a capped index scan, and lists the members of
values that are not hubs; a hub (more readable members than `HUB_MEMBERS`) is clipped
and reported with its exact member count instead. Only records in readable lanes are
ever listed or counted.
Both the GraphQL resolver and the compiled path walk with `traverse`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policies.properties import Property
from store.errors import InvalidInputError
from store.kinds.edge.queries import edge_source
from store.kinds.record import counts
from store.kinds.record.names import note_of
from store.kinds.record.resolve import resolve_id
from store.reads.snapshot import Reader
from store.reads.statements import Params, Statement
from store.reads.visibility import RULE

HUB_MEMBERS = 1000
MAX_DEPTH = 3
MAX_LIMIT = 1000
MAX_LABELS = 32
# Membership rows one hop reads at most beyond the first value past it, to list and
# count what it reaches (values in walking order, each whole); past it, what it leaves
# out is a lower bound. Read further only while the hop still has room to list.
COUNT_BUDGET = 10_000

# Each lookup is a lateral subquery kept apart by OFFSET 0, so it is an index probe by
# the keys the hop has whatever the statistics say: right after a bulk load, before
# ANALYZE, the tables look empty, and a join let the planner read a whole lane of
# memberships, and the frontier's `record_id = ANY(...)` skip-scanned the lane-led
# index. The frontier's held test stays outside its subquery: the partial index on
# current memberships looks tiny then, and drew the lookup away from the record id.
_VALUES = """
held AS (
  SELECT DISTINCT m.label, m.value, m.value_key,
    edgeloom_member_hash(m.label, m.value_key) AS value_hash
  FROM unnest({frontier}) AS f(id) CROSS JOIN LATERAL (
    SELECT m.label, m.value, m.value_key, m.recorded_from, m.recorded_to
    FROM edge_properties m WHERE m.record_id = f.id {labels} OFFSET 0
  ) m
  WHERE {at_m}
),
sized AS (
  SELECT e.label, e.value, e.value_key, ({size}) AS n FROM held e
),
walked AS (
  SELECT s.*, sum(s.n) OVER (
      ORDER BY s.label COLLATE "C", s.value COLLATE "C" ROWS UNBOUNDED PRECEDING) - s.n
    AS before
  FROM sized s WHERE s.n <= {hub}
),
shared AS (
  SELECT x.record_id, s.label, s.value
  FROM walked s CROSS JOIN LATERAL (
    SELECT x.record_id FROM edge_properties x
    WHERE x.label = s.label AND x.value_key = s.value_key AND {member_x} OFFSET 0
  ) x
  WHERE s.before < {budget}
)"""
_NO_VALUES = """
sized AS (SELECT NULL::text AS label, NULL::text AS value, 0::bigint AS n WHERE false),
walked AS (SELECT 0::bigint AS before WHERE false),
shared AS (SELECT NULL::text AS record_id, NULL::text AS label, NULL::text AS value WHERE false)"""
# The typed edges around the frontier, either way: each an index probe by its end. A
# note's record (a file's) speaks for its note: the links its parts make and those made
# to them are the note's, as `related` reads them, so one hop from a note reaches what
# it links to and what links to it; an edge from one of its parts to another is no step.
# (Statements are joined on one line: no SQL comments in them.)
_LINKS = """
notes AS (
  SELECT o.id, ARRAY{note} AS ids FROM unnest({frontier}) AS o(id)
),
linked AS (
  SELECT g.to_id AS record_id, g.type, g.weight, g.id AS edge_id
  FROM notes o CROSS JOIN LATERAL unnest(o.ids) AS n(id) CROSS JOIN LATERAL (
    SELECT g.* FROM {source} WHERE g.from_id = n.id {types} AND {visible} OFFSET 0) g
  WHERE g.to_id <> ALL(o.ids)
  UNION ALL
  SELECT g.from_id, g.type, g.weight, g.id
  FROM notes i CROSS JOIN LATERAL unnest(i.ids) AS n(id) CROSS JOIN LATERAL (
    SELECT g.* FROM {source} WHERE g.to_id = n.id {types} AND {visible} OFFSET 0) g
  WHERE g.from_id <> ALL(i.ids)
)"""
_NO_LINKS = """
linked AS (SELECT NULL::text AS record_id, NULL::text AS type, 0::float8 AS weight,
  NULL::text AS edge_id WHERE false)"""
# `walked`: the values walked, in walking order, each with the members of those before
# it. `reached`: of the edges reaching a record at one hop, the first in order: a typed
# edge (by type, the strongest first) before an edge property (by label and value).
# The `seen` test is an anti join, hashed whatever the plan: `<> ALL(seen)` compares
# each member with every record seen, and a generic plan (from a statement's sixth run)
# cannot hash it.
_HOP = """
WITH {values}, {links},
reached AS (
  SELECT DISTINCT ON (y.record_id) y.record_id, y.rank, y.label, y.value, y.edge_id
  FROM (
    SELECT record_id, 0 AS rank, type AS label, NULL::text AS value, weight, edge_id
    FROM linked
    UNION ALL
    SELECT record_id, 1, label, value, NULL::float8, NULL::text FROM shared
  ) y
  WHERE NOT EXISTS (
    SELECT 1 FROM unnest({seen}) AS seen(id) WHERE seen.id = y.record_id)
  ORDER BY y.record_id, y.rank, y.label COLLATE "C", y.value COLLATE "C",
    y.weight DESC, y.edge_id
)
SELECT NULL AS record_id, label, value, NULL AS edge_id, n AS reached FROM sized
WHERE n > {hub}
UNION ALL
SELECT NULL, NULL, NULL, NULL, count(*) FROM walked WHERE before >= {budget}
UNION ALL (
  SELECT record_id, label, value, edge_id, count(*) OVER () FROM reached
  ORDER BY rank, label COLLATE "C", value COLLATE "C", record_id LIMIT {room}
)
"""
# As of an earlier instant: a value's members counted from the intervals, up to one
# past the hub size (now: the count the write path keeps).
_SIZE_AT = """SELECT count(*) FROM (
      SELECT 1 FROM edge_properties x
      WHERE x.label = e.label AND x.value_key = e.value_key AND {member_x}
      LIMIT {hub} + 1
    ) capped"""
# As of an earlier instant each hub is counted up to `cap` members.
_HUB_SIZES_AT = """
SELECT u.l, u.v, (
  SELECT count(*) FROM (
    SELECT DISTINCT x.record_id FROM edge_properties x
    WHERE x.label = u.l AND x.value_key = edgeloom_value_key(u.v) AND {member_x}
    LIMIT {cap}
  ) capped
) AS n
FROM unnest({labels}, {values}) AS u(l, v)
"""

# What a hop walks of one kind of edge: everything, the names given, or nothing.
ALL, SOME, NONE = "all", "some", "none"


def _chosen(names: Sequence[str] | None) -> str:
    return ALL if names is None else SOME if names else NONE


@functools.cache
def hop_statement(as_of: bool, labels: str = ALL, types: str = ALL) -> Statement:
    """One hop's statement, by whether it reads an earlier instant and what it walks of
    edge properties (`labels`) and typed edges (`types`): ALL, SOME or NONE."""
    p = Params()
    lanes = p("lanes", "text[]")
    at = p("as_of", "timestamptz") if as_of else None
    hub = p("hub", "int")
    if labels == NONE:
        values = _NO_VALUES
    else:
        member_x = RULE.member("x", lanes, at)
        size = (
            _SIZE_AT.format(member_x=member_x, hub=hub)
            if as_of
            else counts.member_count(
                "e.label",
                "e.value",
                lanes,
                key="e.value_key",
                value_hash="e.value_hash",
                shown=False,
            )
        )
        values = _VALUES.format(
            frontier=p("frontier", "text[]"),
            labels=f"AND m.label = ANY({p('walk', 'text[]')})" if labels == SOME else "",
            at_m=RULE.held("m", at),
            size=size,
            hub=hub,
            member_x=member_x,
            budget=p("budget", "bigint"),
        )
    if types == NONE:
        links = _NO_LINKS
    else:
        links = _LINKS.format(
            note=note_of("o.id", lanes, at),
            frontier=p("frontier", "text[]"),
            source=edge_source(p, as_of),
            types=f"AND g.type = ANY({p('types', 'text[]')})" if types == SOME else "",
            visible=RULE.edge("g", lanes, at),
        )
    return p.statement(
        _HOP.format(
            values=values.strip(),
            links=links.strip(),
            seen=p("seen", "text[]"),
            hub=hub,
            budget=p("budget", "bigint"),
            room=p("room", "int"),
        )
    )


@functools.cache
def _hub_sizes_statement() -> Statement:
    p = Params()
    member_x = RULE.member("x", p("lanes", "text[]"), p("as_of", "timestamptz"))
    return p.statement(
        _HUB_SIZES_AT.format(
            member_x=member_x,
            cap=p("cap", "int"),
            labels=p("labels", "text[]"),
            values=p("values", "text[]"),
        )
    )


@dataclass(frozen=True)
class Linked:
    """A typed edge a walk went over: its id and its type."""

    edge_id: str
    type: str

    def __str__(self) -> str:
        return self.type


@dataclass(frozen=True)
class Step:
    """A record reached at `hop` by the edge property or the typed edge `via`."""

    record_id: str
    hop: int
    via: Property | Linked


@dataclass(frozen=True)
class Clipped:
    """A hub value not walked, with how many readable records carry it (with `exact`
    false, at least that many)."""

    via: Property
    hop: int
    member_count: int
    exact: bool = True


@dataclass
class Traversal:
    steps: list[Step] = field(default_factory=list)
    clipped: list[Clipped] = field(default_factory=list)
    beyond_limit: int = 0
    # False when the walk stopped at its limit before reading every value it reached,
    # so `beyond_limit` (and `not_shown`) is a lower bound.
    beyond_limit_exact: bool = True

    @property
    def not_shown(self) -> int:
        """Records reached but not listed: those past the limit, and each clipped hub's
        members (a record on two clipped values counts twice)."""
        return self.beyond_limit + sum(c.member_count for c in self.clipped)

    @property
    def not_shown_exact(self) -> bool:
        return self.beyond_limit_exact and all(c.exact for c in self.clipped)


def check(
    depth: int, limit: int, labels: Sequence[str] | None, edge_types: Sequence[str] | None = None
) -> None:
    if not 1 <= depth <= MAX_DEPTH:
        raise InvalidInputError(
            f"depth must be between 1 and {MAX_DEPTH} (got {depth})", allowed=[1, MAX_DEPTH]
        )
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(
            f"limit must be between 1 and {MAX_LIMIT} (got {limit})", allowed=[1, MAX_LIMIT]
        )
    for name, given in (("labels", labels), ("edgeTypes", edge_types)):
        if given is not None and len(given) > MAX_LABELS:
            raise InvalidInputError(
                f"{name} lists at most {MAX_LABELS} names to walk (got {len(given)}); "
                "omit it to walk every one",
                allowed=[0, MAX_LABELS],
            )
    if labels is not None and not labels and edge_types is not None and not edge_types:
        raise InvalidInputError(
            "labels and edgeTypes are both empty, so nothing would be walked; omit labels "
            "to walk every label, edgeTypes to walk every type of typed edge",
            allowed=[1, MAX_LABELS],
        )


@dataclass(frozen=True)
class Walk:
    """What a walk is asked: where from, how far, over what, as of when, how many."""

    start: str
    lanes: Sequence[str]
    depth: int = 1
    labels: Sequence[str] | None = None
    as_of: datetime | None = None
    limit: int = 100
    edge_types: Sequence[str] | None = None


async def traverse(
    db: Reader,
    start: str,
    lanes: Sequence[str],
    depth: int = 1,
    labels: Sequence[str] | None = None,
    as_of: datetime | None = None,
    limit: int = 100,
    hub: int = HUB_MEMBERS,
    budget: int = COUNT_BUDGET,
    edge_types: Sequence[str] | None = None,
) -> Traversal:
    """Records sharing an edge property with `start` (a readable record) or joined to it
    by a typed edge either way, hop by hop."""
    check(depth, limit, labels, edge_types)
    walk = None if labels is None else [label.strip().replace(" ", "_") for label in labels]
    types = None if edge_types is None else list(edge_types)
    hop_sql = hop_statement(as_of is not None, _chosen(walk), _chosen(types))
    result = Traversal()
    seen = [start]
    frontier = [start]
    for hop in range(1, depth + 1):
        room = limit - len(result.steps)
        params: dict[str, Any] = {
            "frontier": frontier,
            "lanes": list(lanes),
            "hub": hub,
            "seen": seen,
            # At least one row, so a walk already at its limit still learns what it cut.
            "room": max(room, 1),
            "budget": budget,
            "walk": walk,
            "types": types,
            "as_of": as_of,
        }
        hubs, listed, reached, unread = await _hop(db, hop_sql, params)
        while unread and len(listed) < room:
            # Too few records in the values read to fill the page: read on. The budget
            # bounds counting what is left out, never what the walk lists.
            params["budget"] *= 4
            hubs, listed, reached, unread = await _hop(db, hop_sql, params)
        listed = listed[: max(room, 0)]
        result.steps.extend(Step(record_id, hop, via) for record_id, via in listed)
        frontier = [record_id for record_id, _ in listed]
        result.clipped.extend(await _hub_sizes(db, hubs, hop, params, as_of, budget))
        if reached > room or (unread and reached >= room):
            result.beyond_limit = reached - room
            result.beyond_limit_exact = not unread
            break
        seen.extend(frontier)
        if not frontier:
            break
    return result


async def walk_from(db: Reader, asked: Walk) -> Traversal:
    """The walk `asked` for, from the one readable record its start names (an id or a
    unique prefix; refused as `resolve_id` refuses it)."""
    check(asked.depth, asked.limit, asked.labels, asked.edge_types)
    start = await resolve_id(db, asked.start, asked.lanes, asked.as_of)
    return await traverse(
        db,
        start,
        asked.lanes,
        asked.depth,
        asked.labels,
        asked.as_of,
        asked.limit,
        edge_types=asked.edge_types,
    )


async def _hop(
    db: Reader, hop_sql: Statement, params: dict[str, Any]
) -> tuple[list[tuple[Property, int]], list[tuple[str, Property | Linked]], int, int]:
    """One hop's hubs (with their size now), the records it lists (in order), how many
    new records the edges it read reach, and how many values it left unread."""
    hubs: list[tuple[Property, int]] = []
    listed: list[tuple[str, Property | Linked]] = []
    reached = unread = 0
    for record_id, label, value, edge_id, total in await db.fetch(
        hop_sql.text, *hop_sql.args(params)
    ):
        if record_id is not None:
            via = Linked(edge_id, label) if edge_id is not None else Property(label, value)
            listed.append((record_id, via))
            reached = total
        elif label is not None:
            hubs.append((Property(label, value), total))
        else:
            unread = total
    return hubs, listed, reached, unread


async def _hub_sizes(
    db: Reader,
    hubs: Sequence[tuple[Property, int]],
    hop: int,
    params: dict[str, Any],
    as_of: datetime | None,
    budget: int,
) -> list[Clipped]:
    hubs = sorted(hubs, key=lambda h: (h[0].label, h[0].value))
    if as_of is None or not hubs:
        # Exact, from the counts the write path keeps (the hop read them).
        return [Clipped(p, hop, n) for p, n in hubs]
    # Counted from the intervals, the budget shared among the hubs (each is counted past
    # the hub size at least, so that it is known to be a hub).
    cap = max(budget // len(hubs), params["hub"] + 1)
    sized = {
        "labels": [p.label for p, _ in hubs],
        "values": [p.value for p, _ in hubs],
        "lanes": params["lanes"],
        "as_of": as_of,
        "cap": cap,
    }
    statement = _hub_sizes_statement()
    rows = await db.fetch(statement.text, *statement.args(sized))
    found = {Property(r[0], r[1]): int(r[2]) for r in rows}
    return [Clipped(p, hop, found.get(p, 0), exact=found.get(p, 0) < cap) for p, _ in hubs]
