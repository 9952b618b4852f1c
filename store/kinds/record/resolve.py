"""Record ids: an exact id or a unique prefix of at least six hex characters after `sr_`,
and the SQL of the record an id names (as it is now or was at an instant, or retired
then) that the resolvers and the compiled path both build their reads of it from."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from store.errors import AmbiguousIdError, InvalidIdError, NotFoundError, RetiredRecordError
from store.ids import RECORD_ID, RECORD_PREFIX
from store.kinds.record.model import EXPIRY_ACTOR, EXPIRY_REASON
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


def named_sql(r: str, ident: str, prefix: bool = True) -> str:
    """SQL: the record `r` is one the id `ident` (an SQL expression) names: that id, or with
    `prefix` an id starting with it. Every id starting with a prefix sorts between the
    prefix and the prefix followed by the highest hex digit; an exact id is its own range
    ("sr_<32 hex>" < "sr_<32 hex>g"), so the range serves both."""
    col = f"{r}.id" if r else "id"
    return f"{col} >= {ident} AND {col} < {ident} || 'g'" if prefix else f"{col} = {ident}"


def candidates_sql(ident: str, lanes: str, as_of: str | None, n: int) -> str:
    """SQL: the ids of at most `n` records of `lanes` the id or prefix `ident` names, not
    retired now (or at `as_of`, told by their current row: `retired_sql` tells a record
    retired then and restored since), in id order.

    The range is read apart (OFFSET 0) so that it stays a primary key probe whatever the
    statistics: planned for tables not analyzed since a bulk load, the lane test drew it
    to a lane-led index. A prefix of six hex digits or more names few records."""
    return _range(ident, RULE.record("", lanes, as_of), n)


def _range(ident: str, rule: str, n: int) -> str:
    return (
        f"SELECT id FROM (SELECT * FROM records WHERE {named_sql('', ident)} OFFSET 0) "
        f"records WHERE {rule} ORDER BY id LIMIT {n}"
    )


def version_at_sql(r: str, as_of: str) -> str:
    """SQL to join to `records {r}`: `{r}v`, the record's newest version written by `as_of`
    (its version, at, actor, state and hash; none: the record did not exist yet)."""
    return (
        f"CROSS JOIN LATERAL (SELECT e.version, e.at, e.actor, e.state, e.hash FROM ledger e "
        f"WHERE e.kind = 'record' AND e.object_id = {r}.id AND e.at <= {as_of} "
        f"ORDER BY e.version DESC LIMIT 1) {r}v"
    )


def alive_sql(r: str, as_of: str | None) -> str:
    """SQL to append to a read of `records {r}` joined by `version_at_sql`: the version read
    at as_of is no tombstone (now, the records row's rule says it)."""
    return "" if as_of is None else f" AND {RULE.alive(f'{r}v', as_of)}"


def readable_sql(r: str, lanes: str, as_of: str | None) -> str:
    """SQL: the record `r` is one a reader of `lanes` sees now, or (joined by
    `version_at_sql`) as it was at `as_of`."""
    return RULE.record(r, lanes, as_of) + alive_sql(r, as_of)


def retired_sql(r: str, lanes: str, as_of: str | None) -> str:
    """SQL: the record `r` is in a lane of `lanes` and retired now, or (joined by
    `version_at_sql`) was retired at `as_of`: its readers are told so."""
    if as_of is None:
        return RULE.retired_now(r, lanes)
    return f"{RULE.lane(r, lanes)} AND NOT ({RULE.alive(f'{r}v', as_of)})"


RESOLVE = candidates_sql("$1", "$2::text[]", None, MAX_CANDIDATES + 1)
RESOLVE_AT = candidates_sql("$1", "$2::text[]", "$3", MAX_CANDIDATES + 1)
# Among retired records too: reads of history (audit).
RESOLVE_RETIRED_TOO = _range("$1", RULE.lane("", "$2::text[]"), MAX_CANDIDATES + 1)

_TOMB = f"NOT ({RULE.alive('rv')})"
_EXPIRED = RULE.expired_now("")
# A record expired and not swept yet is told as retired at its expiry, by the engine.
_RETIRED_NOW = f"""
SELECT CASE WHEN {_EXPIRED} THEN {RULE.expiry} ELSE retired_at END AS at,
       CASE WHEN {_EXPIRED} THEN '{EXPIRY_ACTOR}' ELSE retired_by END AS actor,
       CASE WHEN {_EXPIRED} THEN '{EXPIRY_REASON}' ELSE retired_reason END AS reason
FROM records
WHERE {named_sql("", "$1", prefix=False)} AND {retired_sql("", "$2::text[]", None)}
"""
# The newest version written by $3 of a readable record, when it is a tombstone (or was
# expired by $3).
_RETIRED_AT = f"""
SELECT CASE WHEN {_TOMB} THEN rv.at ELSE (rv.state->>'{RULE.expiry}')::timestamptz END AS at,
       CASE WHEN {_TOMB} THEN rv.actor ELSE '{EXPIRY_ACTOR}' END AS actor,
       CASE WHEN {_TOMB} THEN rv.state->'{RULE.tombstone}'->>'reason'
            ELSE '{EXPIRY_REASON}' END AS reason
FROM records r {version_at_sql("r", "$3")}
WHERE {named_sql("r", "$1", prefix=False)} AND {retired_sql("r", "$2::text[]", "$3")}
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
