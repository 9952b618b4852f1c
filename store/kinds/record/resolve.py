"""Record ids: an exact id or a unique prefix of at least six hex characters after `sr_`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from store.errors import AmbiguousIdError, InvalidIdError, NotFoundError, RetiredRecordError
from store.ids import RECORD_ID, RECORD_PREFIX
from store.reads.snapshot import Reader
from store.reads.visibility import RULE

MAX_CANDIDATES = 5
_EXPECTED = "'sr_' followed by 32 hex characters, or a unique prefix of at least 6 of them"


def check_record_ident(ident: str) -> str:
    """The id lower-cased and checked for shape, before it reaches SQL."""
    cleaned = ident.strip().lower()
    if not (RECORD_ID.fullmatch(cleaned) or RECORD_PREFIX.fullmatch(cleaned)):
        raise InvalidIdError(ident, _EXPECTED)
    return cleaned


# Prefix range scan on the primary key: every id starting with the prefix sorts
# between the prefix and the prefix followed by the highest hex digit. An exact id
# is its own range ("sr_<32 hex>" < "sr_<32 hex>g"), so one statement serves both.
# The range is read apart (OFFSET 0) so that it stays a primary key probe whatever the
# statistics: planned for tables not analyzed since a bulk load, the lane test drew it
# to a lane-led index. A prefix of six hex digits or more names few records.
_RANGE = (
    "SELECT id FROM (SELECT * FROM records WHERE id >= $1 AND id < $1 || 'g' OFFSET 0) "
    "records WHERE {rule} ORDER BY id LIMIT {n}"
)
RESOLVE = _RANGE.format(rule=RULE.record("", "$2::text[]"), n=MAX_CANDIDATES + 1)
# Among the records not retired at $3 (told by their current row; `refuse_retired`
# tells a record retired then and restored since).
RESOLVE_AT = _RANGE.format(rule=RULE.record("", "$2::text[]", "$3"), n=MAX_CANDIDATES + 1)
# Among retired records too: reads of history (audit).
RESOLVE_RETIRED_TOO = _RANGE.format(rule=RULE.lane("", "$2::text[]"), n=MAX_CANDIDATES + 1)

_RETIRED_NOW = f"""
SELECT retired_at AS at, retired_by AS actor, retired_reason AS reason FROM records
WHERE id = $1 AND {RULE.retired_now("", "$2::text[]")}
"""
# The newest version written by $3 of a readable record, when it is a tombstone.
_RETIRED_AT = f"""
SELECT l.at, l.actor, l.state->'{RULE.tombstone}'->>'reason' AS reason
FROM records r CROSS JOIN LATERAL (
  SELECT e.at, e.actor, e.state FROM ledger e
  WHERE e.kind = 'record' AND e.object_id = r.id AND e.at <= $3
  ORDER BY e.version DESC LIMIT 1
) l
WHERE r.id = $1 AND {RULE.lane("r", "$2::text[]")} AND NOT ({RULE.alive("l")})
"""


def pick(ident: str, cleaned: str, found: Sequence[str]) -> str:
    """The one id `ident` names among the readable ids found for it."""
    if RECORD_ID.fullmatch(cleaned):
        if cleaned not in found:
            raise NotFoundError("record", ident)
        return cleaned
    if not found:
        raise NotFoundError("record", ident)
    if len(found) > 1:
        raise AmbiguousIdError(ident, list(found[:MAX_CANDIDATES]))
    return found[0]


async def refuse_retired(
    db: Reader, record_id: str, ident: str, lanes: Sequence[str], as_of: datetime | None
) -> None:
    """Raise `RetiredRecordError` when the readable record was retired at `as_of` (None:
    is retired now): its readers are told when, by whom and why."""
    if as_of is None:
        rows = await db.fetch(_RETIRED_NOW, record_id, list(lanes))
    else:
        rows = await db.fetch(_RETIRED_AT, record_id, list(lanes), as_of)
    if rows:
        row = rows[0]
        raise RetiredRecordError(ident, row["at"], row["actor"], row["reason"])


async def resolve_id(
    db: Reader,
    ident: str,
    readable_lanes: Sequence[str],
    as_of: datetime | None = None,
    retired: bool = False,
) -> str:
    """The full id of the one readable record `ident` names (the read path's form), among
    the records not retired now (or at `as_of`); a record retired then, named by its
    exact id, is refused saying so. With `retired`, among retired records too."""
    cleaned = check_record_ident(ident)
    lanes = list(readable_lanes)
    if retired:
        rows = await db.fetch(RESOLVE_RETIRED_TOO, cleaned, lanes)
        return pick(ident, cleaned, [row[0] for row in rows])
    if as_of is None:
        rows = await db.fetch(RESOLVE, cleaned, lanes)
    else:
        rows = await db.fetch(RESOLVE_AT, cleaned, lanes, as_of)
    try:
        found = pick(ident, cleaned, [row[0] for row in rows])
    except NotFoundError:
        if RECORD_ID.fullmatch(cleaned):
            await refuse_retired(db, cleaned, ident, lanes, as_of)
        raise
    if as_of is not None:
        await refuse_retired(db, found, ident, lanes, as_of)
    return found
