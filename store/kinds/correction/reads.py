"""Reading corrections: a record's readable corrections, from one builder that the
resolvers and the compiled path both call (`corrections_sql`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from store.kinds.correction.projection import CorrectionRow
from store.reads.snapshot import Reader
from store.reads.visibility import RULE


def corrections_sql(c: str, record_id: str, lanes: str, as_of: str | None) -> str:
    """SQL: the FROM and WHERE of the corrections `c` of the record `record_id` that a
    reader of `lanes` may see, those made by `as_of` if given (SQL expressions)."""
    return (
        f"corrections {c} WHERE {c}.record_id = {record_id} AND {RULE.correction(c, lanes, as_of)}"
    )


def _statement(at: bool) -> str:
    """The corrections of the records $1 readable in the lanes $2 (made by $3), oldest first."""
    found = corrections_sql("c", "asked.id", "$2::text[]", "$3::timestamptz" if at else None)
    return f"""SELECT c.* FROM unnest($1::text[]) AS asked(id) CROSS JOIN LATERAL
        (SELECT c.* FROM {found}) c ORDER BY c.record_id, c.at"""


_NOW = _statement(at=False)
_AT = _statement(at=True)


async def corrections_of(
    db: Reader,
    record_ids: Sequence[str],
    lanes: Sequence[str],
    as_of: datetime | None = None,
) -> dict[str, list[CorrectionRow]]:
    """Each readable record's corrections, oldest first (those made by as_of, if given)."""
    asked = list(dict.fromkeys(record_ids))
    if as_of is None:
        rows = await db.fetch(_NOW, asked, list(lanes))
    else:
        rows = await db.fetch(_AT, asked, list(lanes), as_of)
    found: dict[str, list[CorrectionRow]] = {rid: [] for rid in record_ids}
    for row in rows:
        found[row["record_id"]].append(CorrectionRow(**row))
    return found
