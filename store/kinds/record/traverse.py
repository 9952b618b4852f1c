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
from store.reads.core_sql import fetch
from store.reads.snapshot import Reader
from store.reads.visibility import CORE_AT, CORE_LANES, RULE

HUB_MEMBERS = 1000
MAX_DEPTH = 3
MAX_LIMIT = 1000
MAX_LABELS = 32

_HOP = """
WITH edges AS (
  SELECT DISTINCT m.label, m.value, m.value_key FROM edge_properties m
  WHERE m.record_id = ANY(CAST(:frontier AS text[])) AND {at_m} {labels}
),
sized AS (
  SELECT e.label, e.value, e.value_key, (
    SELECT count(*) FROM (
      SELECT 1 FROM edge_properties x
      WHERE x.label = e.label AND x.value_key = e.value_key
        AND {member_x}
      LIMIT :hub + 1
    ) capped
  ) AS n
  FROM edges e
),
reached AS (
  -- Of the edges reaching a record at one hop, name the first in order.
  SELECT DISTINCT ON (x.record_id) x.record_id, s.label, s.value
  FROM sized s JOIN edge_properties x
    ON x.label = s.label AND x.value_key = s.value_key
   AND {member_x}
  WHERE s.n <= :hub AND x.record_id <> ALL(CAST(:seen AS text[]))
  ORDER BY x.record_id, s.label COLLATE "C", s.value COLLATE "C"
)
SELECT NULL AS record_id, label, value, 0 AS reached FROM sized WHERE n > :hub
UNION ALL (
  SELECT record_id, label, value, count(*) OVER () FROM reached
  ORDER BY label COLLATE "C", value COLLATE "C", record_id LIMIT :room
)
"""
_HUB_SIZES = """
SELECT x.label, x.value, count(DISTINCT x.record_id) AS n FROM edge_properties x
WHERE (x.label, x.value_key) IN (
    SELECT l, edgeloom_value_key(v)
    FROM unnest(CAST(:labels AS text[]), CAST(:values AS text[])) AS u(l, v))
  AND {member_x}
GROUP BY x.label, x.value
"""


def _statement(template: str, as_of: bool, labels: bool) -> Any:
    at = CORE_AT if as_of else None
    return text(
        template.format(
            at_m=RULE.held("m", at),
            member_x=RULE.member("x", CORE_LANES, at),
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
    """A hub value not walked, with how many readable records carry it."""

    via: Property
    hop: int
    member_count: int


@dataclass
class Traversal:
    steps: list[Step] = field(default_factory=list)
    clipped: list[Clipped] = field(default_factory=list)
    beyond_limit: int = 0

    @property
    def not_shown(self) -> int:
        """Records reached but not listed: those past the limit, and each clipped hub's
        members (a record on two clipped values counts twice)."""
        return self.beyond_limit + sum(c.member_count for c in self.clipped)


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
        }
        if walk is not None:
            params["walk"] = walk
        if as_of is not None:
            params["as_of"] = as_of
        hubs: list[Property] = []
        frontier = []
        reached = 0
        for record_id, label, value, total in await fetch(db, hop_sql, params):
            if record_id is None:
                hubs.append(Property(label, value))
            elif len(result.steps) < limit:
                result.steps.append(Step(record_id, hop, Property(label, value)))
                frontier.append(record_id)
                reached = total
        result.clipped.extend(await _hub_sizes(db, sorted(hubs), hop, params, as_of))
        if reached > room:
            result.beyond_limit = reached - room
            break
        seen.extend(frontier)
        if not frontier:
            break
    return result


async def _hub_sizes(
    db: Reader,
    hubs: Sequence[Property],
    hop: int,
    params: dict[str, Any],
    as_of: datetime | None,
) -> list[Clipped]:
    if not hubs:
        return []
    query = _statement(_HUB_SIZES, as_of is not None, False)
    sized = {
        "labels": [p.label for p in hubs],
        "values": [p.value for p in hubs],
        "lanes": params["lanes"],
    }
    if as_of is not None:
        sized["as_of"] = as_of
    counts = {Property(r[0], r[1]): int(r[2]) for r in await fetch(db, query, sized)}
    return [Clipped(p, hop, counts.get(p, 0)) for p in hubs]
