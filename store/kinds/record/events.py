"""The record kind's audit events: their kinds, and the events each record entry implies
(what `verify` and import check the stored events against)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from policies.properties import Property
from store.ids import ADJUSTMENT, CONNECT, GROUP, edge_property_id
from store.kinds.record.model import RecordState, declared
from store.ledger.entry import Entry
from store.ledger.implied import Implied, Links, Shared

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


def _prop(p: Property, **extra: object) -> dict[str, Any]:
    return {"property": str(p), "label": p.label, "value": p.value, **extra}


def _added(before: RecordState | None, state: RecordState) -> list[Property]:
    held = set() if before is None else set(before.properties)
    return [p for p in state.properties if p not in held]


def _removed(before: RecordState | None, state: RecordState) -> list[Property]:
    now = set(state.properties)
    return [] if before is None else [p for p in before.properties if p not in now]


def _ingested(before: RecordState | None, state: RecordState, entry: Entry) -> list[Implied]:
    events = [
        Implied(
            "sr_ingested",
            {
                "sourceType": state.source_type,
                "authority": state.authority,
                "properties": [str(p) for p in declared(state.properties)],
            },
        )
    ]
    chains = [str(p) for p in state.properties if p.label == ADJUSTMENT]
    if chains:
        events.append(Implied("adjusted", {"adjustments": chains}))
    return events


def _updated(before: RecordState | None, state: RecordState, entry: Entry) -> list[Implied]:
    assert before is not None
    payload: dict[str, Any] = {
        "contentChanged": state.content != before.content,
        "added": [str(p) for p in _added(before, state)],
        "removed": [str(p) for p in _removed(before, state)],
    }
    if state.authority != before.authority:
        payload["authority"] = state.authority
    return [Implied("sr_updated", payload)]


def _property_events(name: str, pick: Callable[..., list[Property]]) -> Callable[..., Any]:
    def rule(before: RecordState | None, state: RecordState, entry: Entry) -> list[Implied]:
        return [
            Implied(
                name,
                _prop(p, edgePropertyId=edge_property_id(entry.object_id, p.label, p.value)),
            )
            for p in pick(before, state)
        ]

    return rule


def _asserted(name: str, pick: Callable[..., list[Property]], label: str) -> Callable[..., Any]:
    def rule(before: RecordState | None, state: RecordState, entry: Entry) -> list[Implied]:
        return [Implied(name, _prop(p)) for p in pick(before, state) if p.label == label]

    return rule


def _adjusted(before: RecordState | None, state: RecordState, entry: Entry) -> list[Implied]:
    return [
        Implied("adjusted", {"adjustment": str(p)})
        for p in _added(before, state)
        if p.label == ADJUSTMENT
    ]


def _retired(before: RecordState | None, state: RecordState, entry: Entry) -> list[Implied]:
    reason = None if state.retired is None else state.retired.reason
    return [Implied("sr_retired", {"reason": reason})]


def _restored(before: RecordState | None, state: RecordState, entry: Entry) -> list[Implied]:
    return [Implied("sr_restored", {"ended": [str(p) for p in _removed(before, state)]})]


_RECORD_RULES: dict[str, Callable[[RecordState | None, RecordState, Entry], list[Implied]]] = {
    "sr_ingested": _ingested,
    "sr_updated": _updated,
    "property_added": _property_events("property_added", _added),
    "property_removed": _property_events("property_removed", _removed),
    "connected": _asserted("connected", _added, CONNECT),
    "disconnected": _asserted("disconnected", _removed, CONNECT),
    "grouped": _asserted("grouped", _added, GROUP),
    "ungrouped": _asserted("ungrouped", _removed, GROUP),
    "unadjusted": _asserted("unadjusted", _removed, ADJUSTMENT),
    "adjusted": _adjusted,
    "sr_retired": _retired,
    "sr_restored": _restored,
}


def record_implied(
    before: Mapping[str, Any] | None, entry: Entry, links: Links
) -> tuple[Shared, list[Implied]] | str:
    """The events a record entry implies, or why none can be said."""
    rule = _RECORD_RULES.get(entry.event)
    if rule is None:
        return f"no audit event rule for a record entry '{entry.event}'"
    was = None if before is None else RecordState.from_json(before)
    state = RecordState.from_json(entry.state)
    links.saw(was, entry, state)
    lane = state.lane if was is None else was.lane
    previous = None if entry.version == 1 else entry.version - 1
    return Shared(entry.object_id, lane, previous), rule(was, state, entry)
