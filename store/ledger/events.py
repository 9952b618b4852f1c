"""The kinds of audit event: each one names a change a ledger entry records.

Each ledger kind declares the event kinds of its entries (`store.kinds`); the feed,
`audit(kinds:)` and the dashboard take them from the registry, so none of them changes
when a kind is added.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.errors import InvalidInputError
from store.kinds import event_kinds

RECORD_EVENT_KINDS = (
    "sr_ingested",
    "sr_updated",
    "property_added",
    "property_removed",
    # A tombstone, and the version that brings the record back.
    "sr_retired",
    "sr_restored",
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
