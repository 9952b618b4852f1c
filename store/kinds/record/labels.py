"""Labels in use with how many records carry each: a count the write path maintains.

Every write appends signed deltas (`label_deltas`, see `projection.label_changes`)
in its own statement and never updates a shared counter row, so writers on a hot
label never wait on each other. After commit, a process whose writes have come to a
fold (`counts.fold_share`) folds every committed delta into `label_counts` (with
the other maintained counts, `store.kinds.record.counts`) in its own short
transaction; a read sums the folded counts and the few unfolded deltas.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, literal_column, select, union_all

from store import tables as t
from store.reads.core_sql import fetch
from store.reads.snapshot import Reader
from store.reads.visibility import CORE_LANES, RULE, core


@dataclass(frozen=True)
class LabelCount:
    label: str
    record_count: int


_counted = union_all(
    select(t.label_counts.c.label, t.label_counts.c.records.label("n")).where(
        core(RULE.lane(t.label_counts.name, CORE_LANES))
    ),
    select(t.label_deltas.c.label, t.label_deltas.c.delta.label("n")).where(
        core(RULE.lane(t.label_deltas.name, CORE_LANES))
    ),
).subquery()
_total = func.sum(_counted.c.n)
_LABEL_COUNTS = (
    select(_counted.c.label, _total.label("n"))
    .group_by(_counted.c.label)
    .having(_total > 0)
    .order_by(literal_column("n").desc(), _counted.c.label)
)


# At an earlier instant the counts are those of the memberships held then: a count of
# the history index, not of the maintained counts.
LABEL_COUNTS_AT = f"""
SELECT m.label, count(DISTINCT m.record_id) AS n FROM edge_properties m
WHERE {RULE.member("m", "$1::text[]", "$2")} AND {RULE.caller_label("m.label")}
GROUP BY m.label ORDER BY n DESC, m.label
"""


async def label_counts(
    db: Reader, lanes: Sequence[str], lane: str | None, as_of: datetime | None = None
) -> list[LabelCount]:
    """Caller labels carried now (or at `as_of`), with how many readable records carry
    each (a record is in one lane, so the per-lane counts add up); reserved e_* labels
    are never counted, and neither is a record retired then."""
    chosen = RULE.chosen(lanes, None if lane is None else [lane])
    if not chosen:
        return []
    if as_of is not None:
        rows = await db.fetch(LABEL_COUNTS_AT, chosen, as_of)
    else:
        rows = await fetch(db, _LABEL_COUNTS, {"lanes": chosen})
    return [LabelCount(row[0], int(row[1])) for row in rows]
