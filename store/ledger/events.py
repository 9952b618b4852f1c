"""The kinds of audit event: each one names a change a ledger entry records.

Each ledger kind declares the event kinds of its entries (`store.ledger.registry`); the feed,
`audit(kinds:)` and the dashboard take them from the registry, so none of them changes
when a kind is added.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.errors import InvalidInputError
from store.ledger.registry import event_kinds


def check_kinds(kinds: Sequence[str] | None) -> list[str]:
    """The kinds asked for, all known, each once; None means every kind."""
    known = list(event_kinds())
    if kinds is None:
        return known
    unknown = [k for k in kinds if k not in known]
    if unknown:
        raise InvalidInputError(
            f"unknown event kind(s) {unknown}; the kinds are {known}", allowed=known
        )
    return list(dict.fromkeys(kinds))
