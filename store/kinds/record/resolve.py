"""Record ids: an exact id or a unique prefix of at least six hex characters after `sr_`."""

from __future__ import annotations

from collections.abc import Sequence

from store.errors import AmbiguousIdError, InvalidIdError, NotFoundError
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
RESOLVE = (
    f"SELECT id FROM records WHERE id >= $1 AND id < $1 || 'g' AND {RULE.record('', '$2::text[]')} "
    f"ORDER BY id LIMIT {MAX_CANDIDATES + 1}"
)


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


async def resolve_id(db: Reader, ident: str, readable_lanes: Sequence[str]) -> str:
    """The full id of the one readable record `ident` names (the read path's form)."""
    cleaned = check_record_ident(ident)
    rows = await db.fetch(RESOLVE, cleaned, list(readable_lanes))
    return pick(ident, cleaned, [row[0] for row in rows])
