"""About how many records a search's `match` keeps, from the member counts the write
path maintains: what decides whether its members are read whole (the planner's
MEMBERS_SCORED, the vector list's EXACT_SCAN_MAX)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from store.kinds.record import counts
from store.reads.shape import GatherMode
from store.reads.snapshot import Reader
from store.reads.statements import Params, Statement


def members_estimate_sql(p: Params, properties: int, mode: GatherMode, lanes: str) -> str:
    """SQL: about how many records of the lanes `lanes` (a parameter) `match` keeps, from
    the counts kept now (all of them for UNION, the rarest property's for INTERSECT)."""
    each = [
        f"({counts.member_count(p(f'label_{n}'), p(f'value_{n}'), p(lanes, 'text[]'))})"
        for n in range(properties)
    ]
    if mode is GatherMode.INTERSECT:
        return f"least({', '.join(each)})"
    return " + ".join(each)


@functools.cache
def _members_estimate(properties: int, mode: GatherMode) -> Statement:
    p = Params()
    return p.statement(f"SELECT ({members_estimate_sql(p, properties, mode, 'lanes')})::bigint")


async def members_kept(db: Reader, values: Mapping[str, Any], prefix: str) -> int | None:
    """About how many records a bound search's `match` keeps (None: no match)."""
    properties = values[prefix + "narrowed"]
    if not properties:
        return None
    statement = _members_estimate(properties, values[prefix + "mode"])
    own = {k.removeprefix(prefix): v for k, v in values.items() if k.startswith(prefix)}
    found: int = await db.fetchval(statement.text, *statement.args(own))
    return found
