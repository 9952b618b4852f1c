"""Traverse: breadth first from one record over the edges it shares.

Every edge property is walked the same way: the caller's labels (imputed edges) and
the engine's connections, groups and adjustment chains (asserted edges). One
statement per hop reads the frontier's memberships by record id, sizes each value
with a capped index scan, and lists the members of values that are not hubs; a hub
(more readable members than `HUB_MEMBERS`) is clipped and reported with its exact
member count instead. Only records in readable lanes are ever listed or counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import text

from policies.properties import Property
from store.errors import InvalidInputError
from store.kinds.record import counts
from store.reads.core_sql import fetch
from store.reads.snapshot import Reader
from store.reads.visibility import CORE_AT, CORE_LANES, RULE

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
_HOP = """
WITH edges AS (
  SELECT DISTINCT m.label, m.value, m.value_key
  FROM unnest(CAST(:frontier AS text[])) AS f(id) CROSS JOIN LATERAL (
    SELECT m.label, m.value, m.value_key, m.recorded_from, m.recorded_to
    FROM edge_properties m WHERE m.record_id = f.id {labels} OFFSET 0
  ) m
  WHERE {at_m}
),
sized AS (
  SELECT e.label, e.value, e.value_key, ({size}) AS n FROM edges e
),
walked AS (
  -- The values walked, in walking order, each with the members of those before it.
  SELECT s.*, sum(s.n) OVER (
      ORDER BY s.label COLLATE "C", s.value COLLATE "C" ROWS UNBOUNDED PRECEDING) - s.n
    AS before
  FROM sized s WHERE s.n <= :hub
),
reached AS (
  -- Of the edges reaching a record at one hop, name the first in order.
  SELECT DISTINCT ON (x.record_id) x.record_id, s.label, s.value
  FROM walked s CROSS JOIN LATERAL (
    SELECT x.record_id FROM edge_properties x
    WHERE x.label = s.label AND x.value_key = s.value_key AND {member_x} OFFSET 0
  ) x
  -- An anti join, hashed whatever the plan: `<> ALL(:seen)` compares each member with
  -- every record seen, and a generic plan (from a statement's sixth run) cannot hash it.
  WHERE s.before < :budget AND NOT EXISTS (
    SELECT 1 FROM unnest(CAST(:seen AS text[])) AS seen(id) WHERE seen.id = x.record_id)
  ORDER BY x.record_id, s.label COLLATE "C", s.value COLLATE "C"
)
SELECT NULL AS record_id, label, value, 0 AS reached FROM sized WHERE n > :hub
UNION ALL
SELECT NULL, NULL, NULL, count(*) FROM walked WHERE before >= :budget
UNION ALL (
  SELECT record_id, label, value, count(*) OVER () FROM reached
  ORDER BY label COLLATE "C", value COLLATE "C", record_id LIMIT :room
)
"""
# A value's readable members now: the count the write path keeps. As of an earlier
# instant: counted from the membership intervals, up to one past the hub size.
_SIZE_NOW = counts.member_count("e.label", "e.value", CORE_LANES, key="e.value_key", shown=False)
_SIZE_AT = """SELECT count(*) FROM (
      SELECT 1 FROM edge_properties x
      WHERE x.label = e.label AND x.value_key = e.value_key AND {member_x}
      LIMIT :hub + 1
    ) capped"""
_HUB_SIZES_NOW = f"""
SELECT u.l, u.v, ({counts.member_count("u.l", "u.v", CORE_LANES, shown=False)}) AS n
FROM unnest(CAST(:labels AS text[]), CAST(:values AS text[])) AS u(l, v)
"""
# As of an earlier instant each hub is counted up to `:cap` members.
_HUB_SIZES_AT = """
SELECT u.l, u.v, (
  SELECT count(*) FROM (
    SELECT DISTINCT x.record_id FROM edge_properties x
    WHERE x.label = u.l AND x.value_key = edgeloom_value_key(u.v) AND {member_x}
    LIMIT :cap
  ) capped
) AS n
FROM unnest(CAST(:labels AS text[]), CAST(:values AS text[])) AS u(l, v)
"""


def _statement(template: str, as_of: bool, labels: bool) -> Any:
    at = CORE_AT if as_of else None
    member_x = RULE.member("x", CORE_LANES, at)
    size = _SIZE_AT.format(member_x=member_x) if as_of else _SIZE_NOW
    return text(
        template.format(
            at_m=RULE.held("m", at),
            member_x=member_x,
            size=size,
            labels="AND m.label = ANY(CAST(:walk AS text[]))" if labels else "",
        )
    )


@dataclass(frozen=True)
class Step:
    """A record reached at `hop` by the edge property `via`."""

    record_id: str
    hop: int
    via: Property


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


def check(depth: int, limit: int, labels: Sequence[str] | None) -> None:
    if not 1 <= depth <= MAX_DEPTH:
        raise InvalidInputError(
            f"depth must be between 1 and {MAX_DEPTH} (got {depth})", allowed=[1, MAX_DEPTH]
        )
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(
            f"limit must be between 1 and {MAX_LIMIT} (got {limit})", allowed=[1, MAX_LIMIT]
        )
    if labels is not None and not 1 <= len(labels) <= MAX_LABELS:
        raise InvalidInputError(
            f"labels lists 1 to {MAX_LABELS} labels to walk (got {len(labels)}); "
            "omit it to walk every label",
            allowed=[1, MAX_LABELS],
        )


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
) -> Traversal:
    """Records sharing an edge with `start` (a readable record), hop by hop."""
    check(depth, limit, labels)
    walk = None if labels is None else [label.strip().replace(" ", "_") for label in labels]
    hop_sql = _statement(_HOP, as_of is not None, walk is not None)
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
        }
        if walk is not None:
            params["walk"] = walk
        if as_of is not None:
            params["as_of"] = as_of
        hubs, listed, reached, unread = await _hop(db, hop_sql, params)
        while unread and len(listed) < room:
            # Too few records in the values read to fill the page: read on. The budget
            # bounds counting what is left out, never what the walk lists.
            params["budget"] *= 4
            hubs, listed, reached, unread = await _hop(db, hop_sql, params)
        listed = listed[: max(room, 0)]
        result.steps.extend(Step(record_id, hop, via) for record_id, via in listed)
        frontier = [record_id for record_id, _ in listed]
        result.clipped.extend(await _hub_sizes(db, sorted(hubs), hop, params, as_of, budget))
        if reached > room or (unread and reached >= room):
            result.beyond_limit = reached - room
            result.beyond_limit_exact = not unread
            break
        seen.extend(frontier)
        if not frontier:
            break
    return result


async def _hop(
    db: Reader, hop_sql: Any, params: dict[str, Any]
) -> tuple[list[Property], list[tuple[str, Property]], int, int]:
    """One hop's hubs, the records it lists (in order), how many new records the values
    it read reach, and how many values it left unread."""
    hubs: list[Property] = []
    listed: list[tuple[str, Property]] = []
    reached = unread = 0
    for record_id, label, value, total in await fetch(db, hop_sql, params):
        if record_id is not None:
            listed.append((record_id, Property(label, value)))
            reached = total
        elif label is not None:
            hubs.append(Property(label, value))
        else:
            unread = total
    return hubs, listed, reached, unread


async def _hub_sizes(
    db: Reader,
    hubs: Sequence[Property],
    hop: int,
    params: dict[str, Any],
    as_of: datetime | None,
    budget: int,
) -> list[Clipped]:
    if not hubs:
        return []
    sized: dict[str, Any] = {
        "labels": [p.label for p in hubs],
        "values": [p.value for p in hubs],
        "lanes": params["lanes"],
    }
    if as_of is None:
        # Exact, from the counts the write path keeps.
        query = text(_HUB_SIZES_NOW)
        cap = None
    else:
        # Counted from the intervals, the budget shared among the hubs (each is counted
        # past the hub size at least, so that it is known to be a hub).
        cap = max(budget // len(hubs), params["hub"] + 1)
        query = _statement(_HUB_SIZES_AT, True, False)
        sized["as_of"], sized["cap"] = as_of, cap
    found = {Property(r[0], r[1]): int(r[2]) for r in await fetch(db, query, sized)}
    return [
        Clipped(p, hop, found.get(p, 0), exact=cap is None or found.get(p, 0) < cap) for p in hubs
    ]
