"""The kinds of audit event: each one names a change a ledger entry records.

A new capability adds its kinds here; the feed, `audit(kinds:)` and the dashboard
take them from this list, so none of them changes when a kind is added.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.errors import InvalidInputError

RECORD_EVENT_KINDS = (
    "sr_ingested",
    "sr_updated",
    "property_added",
    "property_removed",
)
# Asserted edges: each is a new version of every record it touches.
ASSERTED_EVENT_KINDS = (
    "connected",
    "disconnected",
    "grouped",
    "ungrouped",
    "adjusted",
    "unadjusted",
)
# A correction is its own ledgered object attached to a record; the record is unchanged.
CORRECTION_EVENT_KINDS = ("corrected",)
POLICY_EVENT_KINDS = ("policy_applied",)

EVENT_KINDS: tuple[str, ...] = (
    *RECORD_EVENT_KINDS,
    *ASSERTED_EVENT_KINDS,
    *CORRECTION_EVENT_KINDS,
    *POLICY_EVENT_KINDS,
)


def check_kinds(kinds: Sequence[str] | None) -> list[str]:
    """The kinds asked for, all known, each once; None means every kind."""
    if kinds is None:
        return list(EVENT_KINDS)
    unknown = [k for k in kinds if k not in EVENT_KINDS]
    if unknown:
        raise InvalidInputError(
            f"unknown event kind(s) {unknown}; the kinds are {list(EVENT_KINDS)}",
            allowed=list(EVENT_KINDS),
        )
    return list(dict.fromkeys(kinds))
