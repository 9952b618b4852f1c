"""The `labels` read: the labels in use with how many records carry each, a count the
write path maintains.

Every write appends signed deltas (`label_deltas`, see `projection.label_changes`)
in its own statement and never updates a shared counter row, so writers on a hot
label never wait on each other. After commit, a process whose writes have come to a
fold (`counts.fold_share`) folds every committed delta into `label_counts` (with
the other maintained counts, `store.kinds.record.counts`) in its own short
transaction; a read sums the folded counts and the few unfolded deltas.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from store.kinds.record.counts import expired_members
from store.reads.compiled_sql import Compiler, Sel, SiteParams
from store.reads.registry import Before, Values, Wants
from store.reads.snapshot import Reader
from store.reads.statements import Params, Statement
from store.reads.visibility import RULE


@dataclass(frozen=True)
class LabelCount:
    label: str
    record_count: int


@dataclass(frozen=True)
class LabelsArgs:
    lane: str | None
    as_of: datetime | None


@dataclass(frozen=True)
class LabelsShape:
    # At an earlier instant: counted from the memberships then, not the maintained counts.
    as_of: bool


@dataclass(frozen=True)
class LabelsRead:
    field: str = "labels"
    before: Before | None = None

    def arguments(self, given: Mapping[str, Any]) -> LabelsArgs:
        return LabelsArgs(given.get("lane"), given.get("asOf"))

    def bind(
        self, values: Values, prefix: str, args: LabelsArgs, lanes: Sequence[str]
    ) -> LabelsShape:
        return bind_labels(values, prefix, lanes, args.lane, args.as_of)

    def sql(self, compiler: Compiler, sel: Sel, shape: LabelsShape) -> str:
        q = compiler.alias("q")
        counted = labels_sql(SiteParams(compiler, sel.site), shape)
        return (
            f"(SELECT coalesce(json_agg({compiler.fields(sel.children, q)} "
            f"ORDER BY {q}.record_count DESC, {q}.label), '[]'::json) FROM ({counted}) {q})"
        )

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> list[LabelCount]:
        args = self.arguments(given)
        return await label_counts(db, lanes, args.lane, args.as_of)


def bind_labels(
    values: dict[str, Any],
    prefix: str,
    lanes: Sequence[str],
    lane: str | None,
    as_of: datetime | None,
) -> LabelsShape:
    """Put the values `labels_sql` takes in `values` (each name after `prefix`): the
    readable lanes, or the one asked if readable; and say its shape."""
    values[prefix + "lanes"] = RULE.chosen(lanes, None if lane is None else [lane])
    values[prefix + "as_of"] = as_of
    return LabelsShape(as_of is not None)


def labels_sql(p: Params, shape: LabelsShape) -> str:
    """SQL: rows (label, record_count) of the caller labels the lanes carry, most carried
    first, then by label."""
    lanes = p("lanes", "text[]")
    if shape.as_of:
        # At an earlier instant the counts are those of the memberships held then: a
        # count of the history index, not of the maintained counts.
        return f"""SELECT m.label, count(DISTINCT m.record_id) AS record_count
            FROM edge_properties m
            WHERE {RULE.member("m", lanes, p("as_of", "timestamptz"))}
            AND {RULE.caller_label("m.label")}
            GROUP BY m.label ORDER BY record_count DESC, m.label"""
    # The folded counts plus the deltas not folded yet, per label, less the records
    # expired now and not retired yet (`counts.expired_members`); e_* are never counted.
    return f"""SELECT c.label, sum(c.n)::bigint AS record_count FROM (
          SELECT label, records AS n FROM label_counts WHERE {RULE.lane("", lanes)}
          UNION ALL SELECT label, delta FROM label_deltas WHERE {RULE.lane("", lanes)}
          UNION ALL SELECT m_.label, -count(DISTINCT x_.id)
            FROM {expired_members("x_", "m_")}
            WHERE {RULE.lane("m_", lanes)} AND {RULE.caller_label("m_.label")}
            AND NOT ({RULE.metadata_label("m_.label")}) GROUP BY m_.label) c
        GROUP BY c.label HAVING sum(c.n) > 0 ORDER BY record_count DESC, c.label"""


@functools.cache
def _statement(shape: LabelsShape) -> Statement:
    p = Params()
    return p.statement(labels_sql(p, shape))


async def label_counts(
    db: Reader, lanes: Sequence[str], lane: str | None, as_of: datetime | None = None
) -> list[LabelCount]:
    """Caller labels carried now (or at `as_of`), with how many readable records carry
    each (a record is in one lane, so the per-lane counts add up); reserved e_* labels
    are never counted, and neither is a record retired then."""
    values: dict[str, Any] = {}
    shape = bind_labels(values, "", lanes, lane, as_of)
    if not values["lanes"]:
        return []
    statement = _statement(shape)
    rows = await db.fetch(statement.text, *statement.args(values))
    return [LabelCount(row[0], int(row[1])) for row in rows]


READ = LabelsRead()
