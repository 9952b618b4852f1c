"""About how many records a search's `match` keeps, from the member counts the write
path maintains: what decides whether its members are read whole (the planner's
MEMBERS_SCORED and EXACT_SCAN_MAX)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from store.kinds.record import counts
from store.reads.gather_mode import GatherMode
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
def _members_estimate(properties: int, mode: GatherMode, lanes: tuple[str, ...]) -> Statement:
    p = Params()
    each = [f"({members_estimate_sql(p, properties, mode, x)})::bigint" for x in lanes]
    return p.statement(f"SELECT {', '.join(each)}")


async def members_kept(
    db: Reader, values: Mapping[str, Any], prefix: str, lanes: tuple[str, ...]
) -> tuple[int, ...] | None:
    """About how many records a bound search's `match` keeps among each of `lanes` (the
    names of its values holding lanes: those it reads, those its vector is compared in),
    in one statement (None: no match)."""
    properties = values[prefix + "narrowed"]
    if not properties:
        return None
    statement = _members_estimate(properties, values[prefix + "mode"], lanes)
    own = {k.removeprefix(prefix): v for k, v in values.items() if k.startswith(prefix)}
    row = await db.fetchrow(statement.text, *statement.args(own))
    assert row is not None
    return tuple(row)
