"""Asserted edges: connections, groups and adjustment links, one command each.

The engine mints each value (`e_connect:<hint>_<32 hex>`, `e_group:...`,
`e_adjustment:...`) and writes it on every record it joins as a new version of that
record, through the same guard (write access to each record's lane) and the same
executor as every other write. Removing one names the value: the executor locks the
records carrying it (`Records.carrying`) in sorted order with the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from policies.guard import RecordChange, SetChange, decide, decide_set
from policies.properties import Property
from store.errors import InvalidInputError, NotFoundError
from store.ids import (
    ADJUSTMENT,
    ASSERTED_VALUE,
    CONNECT,
    GROUP,
    HINT,
    new_asserted_value,
)
from store.kinds.record.locks import Records, RecordsRead
from store.kinds.record.model import Record, next_version
from store.ledger.command import Current, Event, Locks, Plan, Txn, Write
from store.limits import MAX_BATCH, check_count

_NAMES = {CONNECT: "connection", GROUP: "group", ADJUSTMENT: "adjustment chain"}


def check_hint(hint: str) -> str:
    """A hint names what the relation is; it becomes part of the minted value."""
    if not HINT.fullmatch(hint):
        raise InvalidInputError(
            f"hint {hint[:80]!r} is not allowed: a hint is 1 to 64 characters, each a letter "
            "(a-z, A-Z), a digit (0-9), '_' or '-', for example works_with",
            allowed="[A-Za-z0-9_-]{1,64}",
        )
    return hint


def mint(label: str, hint: str) -> Property:
    return Property(label, new_asserted_value(check_hint(hint)))


def parse_asserted(text: str, label: str) -> Property:
    """`e_connect:<hint>_<32 hex>` (or just its value) as the property it names."""
    value = text.strip()
    if value.startswith(label + ":"):
        value = value[len(label) + 1 :]
    if not ASSERTED_VALUE.fullmatch(value):
        raise InvalidInputError(
            f"'{text[:80]}' is not a {_NAMES[label]} id; expected {label}:<hint>_<32 hex>, "
            f"as {_NAMES[label]} returned it"
        )
    return Property(label, value)


def kind_name(label: str) -> str:
    """What a value of the asserted `label` is called: connection, group, adjustment chain."""
    return _NAMES[label]


def hint_of(prop: Property) -> str:
    return prop.value[:-33]


@dataclass(frozen=True)
class Connect:
    """Join exactly two distinct records with a new `e_connect` value."""

    a: str
    b: str
    hint: str

    def __post_init__(self) -> None:
        check_hint(self.hint)

    def locks(self) -> Locks:
        return Records((self.a, self.b)).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Property]:
        first, second = current.rows.record(self.a), current.rows.record(self.b)
        if first.id == second.id:
            raise InvalidInputError(
                f"connect joins exactly two distinct records, but a and b both name "
                f"'{first.id}'; to join two or more records as a set, use group"
            )
        prop = mint(CONNECT, self.hint)
        writes = [
            joined(txn, r, [prop], [Event("connected", _payload(prop, other=o.id))], "connected")
            for r, o in ((first, second), (second, first))
        ]
        return Plan(writes, lambda _: prop)


@dataclass(frozen=True)
class Disconnect:
    """Remove a connection from both its records."""

    id: str

    def locks(self) -> Locks:
        prop = parse_asserted(self.id, CONNECT)
        return Records(carrying=((prop.label, prop.value),)).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Property]:
        prop = parse_asserted(self.id, CONNECT)
        members = _members(current, prop, self.id)
        changing(txn, current, prop)
        event = Event("disconnected", _payload(prop))
        writes = [left(txn, r, [prop], [event], "disconnected") for r in members]
        return Plan(writes, lambda _: prop)


@dataclass(frozen=True)
class Group:
    """Make two or more records members of a new `e_group` value."""

    record_ids: tuple[str, ...]
    hint: str

    def __post_init__(self) -> None:
        check_hint(self.hint)
        if len(self.record_ids) > MAX_BATCH:
            raise InvalidInputError(
                f"a group is made of at most {MAX_BATCH} records at once "
                f"(got {len(self.record_ids)})",
                allowed=MAX_BATCH,
            )

    def locks(self) -> Locks:
        return Records(self.record_ids).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Property]:
        records = _distinct(current.rows.record(i) for i in self.record_ids)
        if len(records) < 2:
            raise InvalidInputError(
                f"group needs at least two distinct records (got {len(records)}); "
                "to join one record to another, pass both"
            )
        prop = mint(GROUP, self.hint)
        event = Event("grouped", _payload(prop, members=len(records)))
        writes = [joined(txn, r, [prop], [event], "grouped") for r in records]
        return Plan(writes, lambda _: prop)


@dataclass(frozen=True)
class Ungroup:
    """Remove the named members, or every member when none are named; a group left
    with fewer than two members is dissolved (removed from the last one too)."""

    id: str
    record_ids: tuple[str, ...] | None = None

    def locks(self) -> Locks:
        prop = parse_asserted(self.id, GROUP)
        return Records(self.record_ids or (), carrying=((prop.label, prop.value),)).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Property]:
        prop = parse_asserted(self.id, GROUP)
        writes = _leave_set(txn, current, prop, self.id, self.record_ids, "ungrouped")
        return Plan(writes, lambda _: prop)


@dataclass(frozen=True)
class Unadjust:
    """Take one record off an adjustment chain; a chain of one is no chain, so it ends."""

    record_id: str
    adjustment: str

    def locks(self) -> Locks:
        prop = parse_asserted(self.adjustment, ADJUSTMENT)
        return Records((self.record_id,), carrying=((prop.label, prop.value),)).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Property]:
        prop = parse_asserted(self.adjustment, ADJUSTMENT)
        writes = _leave_set(txn, current, prop, self.adjustment, (self.record_id,), "unadjusted")
        return Plan(writes, lambda _: prop)


def _leave_set(
    txn: Txn,
    current: Current[RecordsRead],
    prop: Property,
    ident: str,
    named: Sequence[str] | None,
    kind: str,
) -> list[Write]:
    """Versions taking `prop` off the named members, or off all when fewer than two stay."""
    members = _members(current, prop, ident)
    # Taking one record off changes the set for every record on it.
    changing(txn, current, prop)
    leaving: Sequence[Record] = members
    if named:
        leaving = _distinct(current.rows.record(i) for i in named)
        held = {m.id for m in members}
        for record in leaving:
            if record.id not in held:
                raise InvalidInputError(
                    f"record '{record.id}' is not on {_NAMES[prop.label]} '{prop}'; "
                    f"its members you may read are {sorted(held)}",
                    allowed=sorted(held),
                )
    dissolved = not named or len(members) - len(leaving) < 2
    if dissolved:
        leaving = members
    event = Event(kind, _payload(prop, dissolved=dissolved))
    return [left(txn, r, [prop], [event], kind) for r in leaving]


def changing(txn: Txn, current: Current[RecordsRead], prop: Property) -> None:
    """Ask the guard whether the caller may change the set `prop` names, as its current
    holders (locked by the executor) stand: every one readable and writable."""
    key = (prop.label, prop.value)
    lanes = tuple(r.lane for r in current.rows.holders.get(key, ()))
    hidden = current.rows.hidden_holders.get(key, 0)
    decide_set(txn.rules, txn.agent, SetChange(_NAMES[prop.label], str(prop), lanes, hidden))


def _members(current: Current[RecordsRead], prop: Property, ident: str) -> tuple[Record, ...]:
    members = current.rows.holders.get((prop.label, prop.value), ())
    if not members:
        raise NotFoundError(_NAMES[prop.label], ident)
    return members


def _distinct(records: Any) -> list[Record]:
    seen: dict[str, Record] = {}
    for record in records:
        seen.setdefault(record.id, record)
    return list(seen.values())


def _payload(prop: Property, **extra: object) -> dict[str, Any]:
    return {"property": str(prop), "label": prop.label, "value": prop.value, **extra}


# -- the two moves every asserted edge makes on a record ----------------------


def joined(
    txn: Txn, record: Record, props: Sequence[Property], events: Sequence[Event], name: str
) -> Write:
    """The next version of `record` carrying `props` too (an engine change)."""
    held = set(record.state.properties)
    added = [p for p in props if p not in held]
    check_count(len(record.state.properties) + len(added))
    _guard(txn, record, added=tuple(added))
    return _version(record, [*record.state.properties, *added], events, name)


def left(
    txn: Txn, record: Record, props: Sequence[Property], events: Sequence[Event], name: str
) -> Write:
    """The next version of `record` without `props` (an engine change)."""
    gone = set(props)
    _guard(txn, record, removed=tuple(props))
    return _version(record, [p for p in record.state.properties if p not in gone], events, name)


def _guard(txn: Txn, record: Record, **change: Any) -> None:
    s = record.state
    decide(
        txn.rules,
        txn.agent,
        RecordChange(s.lane, s.source_type, engine=True, authority=s.authority, **change),
    )


def _version(
    record: Record, properties: Sequence[Property], events: Sequence[Event], name: str
) -> Write:
    state = replace(record.state, properties=tuple(properties))
    return next_version(record, state, name, events)


def pending_chains(record: Record, pending: Mapping[str, Sequence[Property]]) -> list[Property]:
    """The adjustment chains `record` is on, counting those this command adds."""
    held = [p for p in record.state.properties if p.label == ADJUSTMENT]
    return [*held, *(p for p in pending.get(record.id, ()) if p not in held)]
