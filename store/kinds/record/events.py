"""The record kind's audit events: their kinds, and the events each record entry implies
(what `verify` and import check the stored events against)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from policies.properties import Property
from store.ids import ADJUSTMENT, CONNECT, GROUP, edge_property_id
from store.kinds.record.model import RecordState, declared, instant_text
from store.ledger.entry import Entry
from store.ledger.implied import Implied, Links, Shared, differs
from store.reads.visibility import RULE

RECORD_EVENT_KINDS = (
    "sr_ingested",
    "sr_updated",
    "property_added",
    "property_removed",
    # A tombstone, and the version that brings the record back.
    "sr_retired",
    "sr_restored",
    # An erasure (store.kinds.record.erase): a tombstone that also erased the content.
    "sr_erased",
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


@dataclass
class RecordLinks(Links):
    """What the entries of asserted edges say about each other, gathered while reading:
    `other` of `connected` and `members` of `grouped` are checked exactly, `adjustedBy`
    and `adjusts` of `adjusted` and `dissolved` of `ungrouped`/`unadjusted` only for what
    the ledger can tell (it keeps no trace of which entries one transaction wrote)."""

    minted: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    first: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    ever: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    held: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def saw(self, before: RecordState | None, entry: Entry, state: RecordState) -> None:
        had = set() if before is None else set(before.properties)
        for prop in state.properties:
            if not prop.reserved:
                continue
            text = str(prop)
            self.ever[text].add(entry.object_id)
            if entry.version == 1:
                self.first[text].add(entry.object_id)
            if prop not in had and entry.event in ("connected", "grouped"):
                self.minted[text].append(entry.object_id)

    def last(self, state: Mapping[str, Any], object_id: str) -> None:
        """An object's newest record state: the reserved values it holds now (none while
        it is retired)."""
        for prop in RecordState.from_json(state).held():
            if prop.reserved:
                self.held[str(prop)].add(object_id)

    def check(self, me: str, name: str, payload: dict[str, Any]) -> str | None:
        stored = payload[name]
        if name == "other":
            joined = self.minted.get(str(payload.get("property")), [])
            others = [r for r in joined if r != me]
            expected = others[0] if len(joined) == 2 and len(others) == 1 else None
            return None if stored == expected else differs(name, stored, expected)
        if name == "members":
            count = len(self.minted.get(str(payload.get("property")), []))
            return None if stored == count else differs(name, stored, count)
        if name == "adjustedBy":
            if stored != me and stored in self.first.get(str(payload.get("adjustment")), ()):
                return None
            return (
                f"payload field 'adjustedBy' is {stored!r}, which is no record first written "
                f"on {payload.get('adjustment')}"
            )
        if name == "adjusts":
            chains = payload.get("adjustments") or []
            on = set().union(*(self.ever.get(str(c), set()) for c in chains)) - {me}
            if isinstance(stored, list) and stored == sorted(set(stored)) and set(stored) <= on:
                return None
            return (
                f"payload field 'adjusts' is {stored!r}; the records on those chains are "
                f"{sorted(on)}"
            )
        # dissolved: a value that is still held was not dissolved.
        holders = sorted(self.held.get(str(payload.get("property")), ()))
        if not isinstance(stored, bool):
            return differs(name, stored, "true or false")
        if stored and holders:
            return (
                f"payload field 'dissolved' is true, but {payload.get('property')} is still "
                f"held by {holders}"
            )
        return None


# Payload fields that name other records: checked by `RecordLinks` once every entry is read.
_LINKED: dict[str, tuple[str, ...]] = {
    "connected": ("other",),
    "grouped": ("members",),
    "adjusted": ("adjustedBy", "adjusts"),
    "ungrouped": ("dissolved",),
    "unadjusted": ("dissolved",),
}


def _linked(want: Implied) -> tuple[str, ...]:
    """The payload fields of `want` that name other records (see `RecordLinks`)."""
    if want.kind == "adjusted":
        return ("adjusts",) if "adjustments" in want.payload else ("adjustedBy",)
    return _LINKED.get(want.kind, ())


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
                **expiry_payload(None, state),
            },
        )
    ]
    chains = [str(p) for p in state.properties if p.label == ADJUSTMENT]
    if chains:
        events.append(Implied("adjusted", {"adjustments": chains}))
    return events


def _updated(before: RecordState | None, state: RecordState, entry: Entry) -> list[Implied]:
    assert before is not None
    # Metadata is no edge property: the payload says what it is now, when it changed.
    payload: dict[str, Any] = {
        "contentChanged": state.content != before.content,
        "added": [str(p) for p in RULE.walked(_added(before, state))],
        "removed": [str(p) for p in RULE.walked(_removed(before, state))],
    }
    if state.authority != before.authority:
        payload["authority"] = state.authority
    if state.metadata != before.metadata:
        payload["metadata"] = state.metadata
    payload.update(expiry_payload(before, state))
    return [Implied("sr_updated", payload)]


def expiry_payload(before: RecordState | None, state: RecordState) -> dict[str, str]:
    """`expiresAt` in a payload: when the write gave the record a new expiry."""
    expires = state.expires_at
    if expires is None or (before is not None and expires == before.expires_at):
        return {}
    return {"expiresAt": instant_text(expires)}


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


def _erased(before: RecordState | None, state: RecordState, entry: Entry) -> list[Implied]:
    erased = state.erased
    if erased is None:
        return []
    # Not how many entries it erased: some may be of edges to records the reader cannot read.
    return [Implied("sr_erased", {"reason": erased.reason})]


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
    "sr_erased": _erased,
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
    assert isinstance(links, RecordLinks)  # the record kind's own (`RecordKind.links`)
    links.saw(was, entry, state)
    lane = state.lane if was is None else was.lane
    previous = None if entry.version == 1 else entry.version - 1
    implied = [replace(i, linked=_linked(i)) for i in rule(was, state, entry)]
    return Shared(entry.object_id, lane, previous), implied
