"""Record commands: ingest, update, add and remove properties.

Each is a frozen dataclass with the executor's protocol (`store.ledger.command`): what it
locks, and a pure decision from the records it locked to the versions it appends.
Checks that need no state run when the command is built, before any database work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from policies.errors import PolicyError, PropertyFormatError, ReservedLabelError
from policies.guard import NO_EXPIRY, Expiry, RecordChange, decide, decide_expiry, lane_expiry
from policies.model import DEFAULT_LANE, DEFAULT_SOURCE_TYPE
from policies.properties import Property, is_reserved_label, parse_properties, parse_property
from store.errors import (
    BatchItemError,
    IdempotencyConflictError,
    InvalidInputError,
    StoreError,
    VersionConflictError,
)
from store.ids import ADJUSTMENT, ADJUSTMENT_HINT, edge_property_id, new_record_id
from store.kinds.record import embedding
from store.kinds.record.asserted_commands import changing, joined, mint, pending_chains
from store.kinds.record.events import expiry_payload
from store.kinds.record.locks import Records, RecordsRead
from store.kinds.record.model import (
    Record,
    RecordState,
    declared,
    next_version,
)
from store.ledger.command import Applied, Current, Event, Locks, Plan, Txn, Write
from store.limits import (
    check_batch,
    check_content,
    check_count,
    check_idempotency_key,
    check_storable,
)
from store.reads.visibility import RULE

MAX_ADJUSTS = 16


@dataclass(frozen=True)
class NewRecord:
    """One record to write, as the caller gave it."""

    content: str
    properties: tuple[str, ...] = ()
    source_type: str | None = None
    lane: str | None = None
    idempotency_key: str | None = None
    adjusts: tuple[str, ...] = ()  # records this one adjusts: it joins their chains
    # Facts about the record, `key:value`, written by the engine (intake), never by a
    # caller: no policy's labels govern them, and no edge property is made of them.
    metadata: tuple[str, ...] = ()
    # The caller's vector for the content, packed (store.kinds.record.embedding.pack).
    embedding: bytes | None = None
    # When it expires, as the caller asks (none: its lane's lifetime, if it gives one).
    expiry: Expiry = NO_EXPIRY

    def __post_init__(self) -> None:
        if len(self.adjusts) > MAX_ADJUSTS:
            raise InvalidInputError(
                f"a record adjusts at most {MAX_ADJUSTS} records (got {len(self.adjusts)})",
                allowed=MAX_ADJUSTS,
            )
        if self.idempotency_key is not None and not self.idempotency_key.strip():
            raise InvalidInputError(
                "idempotencyKey is empty; omit it, or pass a key that names this write "
                "(for example a UUID) so a retry with the same key returns it"
            )
        if self.idempotency_key is not None:
            check_idempotency_key(self.idempotency_key)
        check_content(self.content)
        check_storable(*self.properties, *self.metadata)

    def same_as(self, first: Record) -> bool:
        """Whether this asks for exactly what the first write under its key wrote."""
        state = first.state
        return (
            (self.lane or DEFAULT_LANE) == state.lane
            and (self.source_type or DEFAULT_SOURCE_TYPE) == state.source_type
            and self.content == state.content
            and self.embedding == state.embedding
            and set(parse_properties(self.properties)) == set(declared(state.properties))
        )


@dataclass(frozen=True)
class Ingest:
    """Write new records, all or nothing; a retried idempotency key returns its first write."""

    inputs: tuple[NewRecord, ...]

    def __post_init__(self) -> None:
        check_batch(len(self.inputs))
        keys = [i.idempotency_key for i in self.inputs if i.idempotency_key]
        if len(set(keys)) != len(keys):
            raise InvalidInputError("each idempotencyKey may appear once per ingestMany call")

    def locks(self) -> Locks:
        keys = tuple(i.idempotency_key for i in self.inputs if i.idempotency_key)
        adjusted = tuple(ident for i in self.inputs for ident in i.adjusts)
        # Adjusting a record on a chain changes the chain: its holders are locked too.
        chains = (ADJUSTMENT,) if adjusted else ()
        return Records(adjusted, idempotency_keys=keys, carried_by_records=chains).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[list[Record]]:
        writes: list[Write] = []
        results: list[Record | str] = []
        # Chains this batch adds to the records it adjusts, written once per record.
        chains: dict[str, list[Property]] = {}
        links: dict[str, list[Event]] = {}
        for index, item in enumerate(self.inputs):
            try:
                first = current.rows.first_writes.get(item.idempotency_key or "")
                if first is None:
                    write = self._write(txn, item, current, chains, links)
                    writes.append(write)
                    results.append(write.object_id)
                else:
                    results.append(self._retry(txn, item, first))
            except (PolicyError, StoreError) as exc:
                if len(self.inputs) == 1:
                    raise
                raise BatchItemError(index, exc) from exc
        by_id = {r.id: r for r in current.rows.records.values()}
        for record_id, added in chains.items():
            record = by_id[record_id]
            writes.append(joined(txn, record, added, links[record_id], "adjusted"))

        def result(applied: Applied[Record]) -> list[Record]:
            return [r if isinstance(r, Record) else applied.records[r] for r in results]

        return Plan(writes, result)

    @staticmethod
    def _write(
        txn: Txn,
        item: NewRecord,
        current: Current[RecordsRead],
        chains: dict[str, list[Property]],
        links: dict[str, list[Event]],
    ) -> Write:
        properties = _caller_properties(item.properties)
        metadata = _metadata(item.metadata)
        lane = item.lane or DEFAULT_LANE
        stamp = decide(
            txn.rules,
            txn.agent,
            RecordChange(
                lane,
                item.source_type,
                new=True,
                content=item.content,
                added=tuple(properties),
                embedding=None if item.embedding is None else embedding.size(item.embedding),
            ),
        )
        record_id = new_record_id()
        events = [Event("sr_ingested", {})]
        on = _adjust(txn, record_id, item, current, chains, links)
        if on:
            check_count(len(properties) + len(on))
            adjusts = sorted({current.rows.record(i).id for i in item.adjusts})
            payload = {"adjustments": [str(p) for p in on], "adjusts": adjusts}
            events.append(Event("adjusted", payload))
        state = RecordState(
            item.content,
            stamp.lane,
            stamp.source_type,
            stamp.authority,
            (*properties, *metadata, *on),
            embedding=item.embedding,
            expires_at=lane_expiry(txn.rules.lane(stamp.lane), txn.at, item.expiry),
        )
        ingested = {
            "sourceType": state.source_type,
            "authority": state.authority,
            "properties": [str(p) for p in properties],
            **expiry_payload(None, state),
        }
        events[0] = Event("sr_ingested", ingested)
        return Write(
            kind="record",
            object_id=record_id,
            event="sr_ingested",
            state=state.to_json(),
            previous=None,
            events=tuple(events),
            lane=state.lane,
            record_id=record_id,
            idempotency_key=item.idempotency_key,
        )

    @staticmethod
    def _retry(txn: Txn, item: NewRecord, first: Record) -> Record:
        """A retry writes nothing and returns the first write as it was written, never
        the record as others have changed it since (the caller may not read its lane)."""
        # Asking again to write where the first call wrote: under a newer policy that
        # lane may be closed to the caller.
        decide(txn.rules, txn.agent, RecordChange(first.lane, first.state.source_type))
        if not item.same_as(first):
            raise IdempotencyConflictError(item.idempotency_key or "", first.id)
        return first


@dataclass(frozen=True)
class Update:
    """Replace content and/or the values of the named labels (and metadata keys); other
    labels (and keys) stay. The record's vector stays while its content does; new content
    without a new vector drops it (it was the old content's)."""

    record_id: str
    content: str | None = None
    properties: tuple[str, ...] | None = None
    expected_version: int | None = None
    metadata: tuple[str, ...] = ()  # `key:value`, as `NewRecord.metadata`
    embedding: bytes | None = None
    # A new expiry (none asked: the record keeps its own).
    expiry: Expiry = NO_EXPIRY

    def __post_init__(self) -> None:
        if self.content is not None:
            check_content(self.content)
        check_storable(*(self.properties or ()), *self.metadata)

    def locks(self) -> Locks:
        return Records((self.record_id,)).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Record]:
        record = current.rows.record(self.record_id)
        if self.expected_version is not None and self.expected_version != record.version:
            raise VersionConflictError(record.id, self.expected_version, record.version)
        before = record.state
        properties = list(before.properties)
        if self.properties is not None:
            named = _caller_properties(self.properties)
            labels = {p.label for p in named}
            merged = [p for p in properties if p.label not in labels] + named
            # The values already held, named in another order, are no change.
            if set(merged) != set(properties):
                properties = merged
            check_count(len(properties))
        if self.metadata:
            facts = _metadata(self.metadata)
            keys = {p.label for p in facts}
            merged = [p for p in properties if p.label not in keys] + facts
            if set(merged) != set(properties):
                properties = merged
        content = before.content if self.content is None else self.content
        vector = self.embedding
        if vector is None and content == before.content:
            vector = before.embedding
        held, now = set(before.properties), set(properties)
        # Metadata is the engine's: the policy's labels govern the caller's properties.
        added = tuple(p for p in properties if p not in held and not RULE.is_metadata(p.label))
        removed = tuple(
            p for p in before.properties if p not in now and not RULE.is_metadata(p.label)
        )
        stamp = decide(
            txn.rules,
            txn.agent,
            RecordChange(
                record.lane,
                before.source_type,
                content=content if content != before.content else None,
                added=added,
                removed=removed,
                authority=before.authority,
                embedding=None if self.embedding is None else embedding.size(self.embedding),
            ),
        )
        state = RecordState(
            content,
            stamp.lane,
            stamp.source_type,
            stamp.authority,
            tuple(properties),
            embedding=vector,
            expires_at=decide_expiry(txn.at, self.expiry, before.expires_at),
        )
        if state == before:
            return Plan((), lambda _: record)
        payload: dict[str, Any] = {
            "contentChanged": content != before.content,
            "added": [str(p) for p in added],
            "removed": [str(p) for p in removed],
        }
        payload.update(expiry_payload(before, state))
        if stamp.authority != before.authority:
            payload["authority"] = stamp.authority
        metadata = RULE.metadata(properties)
        if metadata != before.metadata:
            payload["metadata"] = metadata
        write = next_version(record, state, "sr_updated", [Event("sr_updated", payload)])
        return Plan((write,), lambda applied: applied.records[record.id])


@dataclass(frozen=True)
class PropertyChange:
    """What an add or remove did: each list holds `label:value` strings."""

    record: Record
    added: list[str] = field(default_factory=list)
    already_held: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    not_held: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AddProperties:
    """Add-only: held values are reported, reserved labels rejected, the rest added."""

    record_id: str
    properties: tuple[str, ...]

    def __post_init__(self) -> None:
        check_storable(*self.properties)

    def locks(self) -> Locks:
        return Records((self.record_id,)).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[PropertyChange]:
        record = current.rows.record(self.record_id)
        held = set(record.state.properties)
        added: list[Property] = []
        already: list[str] = []
        rejected: list[str] = []
        for text in self.properties:
            prop = parse_property(text)
            if prop.reserved:
                rejected.append(str(prop))
            elif prop in held or prop in added:
                already.append(str(prop))
            else:
                added.append(prop)
        check_count(len(record.state.properties) + len(added))
        decide(
            txn.rules,
            txn.agent,
            RecordChange(
                record.lane,
                record.state.source_type,
                added=tuple(added),
                add_only=True,
                authority=record.state.authority,
            ),
        )

        def change(r: Record) -> PropertyChange:
            return PropertyChange(
                record=r, added=[str(p) for p in added], already_held=already, rejected=rejected
            )

        if not added:
            return Plan((), lambda _: change(record))
        state = _with_properties(record.state, [*record.state.properties, *added])
        events = [Event("property_added", _property_payload(record.id, p)) for p in added]
        write = next_version(record, state, "property_added", events)
        return Plan((write,), lambda applied: change(applied.records[record.id]))


@dataclass(frozen=True)
class RemoveProperties:
    """Remove whole labels and/or single values; what is not held is reported."""

    record_id: str
    labels: tuple[str, ...] = ()
    properties: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.labels and not self.properties:
            raise InvalidInputError("removeProperties needs labels, properties, or both")
        labels = [_clean_label(label) for label in self.labels]
        values = parse_properties(self.properties)
        reserved = sorted(
            {lb for lb in labels if is_reserved_label(lb)} | {p.label for p in values if p.reserved}
        )
        if reserved:
            raise ReservedLabelError(reserved, operation="removed by removeProperties")

    def locks(self) -> Locks:
        return Records((self.record_id,)).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[PropertyChange]:
        record = current.rows.record(self.record_id)
        labels = [_clean_label(label) for label in self.labels]
        values = parse_properties(self.properties)
        held = record.state.properties
        gone = [p for p in held if p.label in labels or p in values]
        not_held = [lb for lb in labels if all(p.label != lb for p in held)]
        not_held += [str(p) for p in values if p not in held]
        decide(
            txn.rules,
            txn.agent,
            RecordChange(record.lane, record.state.source_type, removed=tuple(gone)),
        )

        def change(r: Record) -> PropertyChange:
            return PropertyChange(record=r, removed=[str(p) for p in gone], not_held=not_held)

        if not gone:
            return Plan((), lambda _: change(record))
        state = _with_properties(record.state, [p for p in held if p not in gone])
        events = [Event("property_removed", _property_payload(record.id, p)) for p in gone]
        write = next_version(record, state, "property_removed", events)
        return Plan((write,), lambda applied: change(applied.records[record.id]))


# -- shared steps -----------------------------------------------------------------


def _adjust(
    txn: Txn,
    record_id: str,
    item: NewRecord,
    current: Current[RecordsRead],
    chains: dict[str, list[Property]],
    links: dict[str, list[Event]],
) -> list[Property]:
    """The chains a new record joins: every chain of the records it adjusts (adjusting
    the newest link extends its chain, so the caller must be able to change it), plus
    one new chain, minted for it and written on each adjusted record that is on none."""
    adjusted = {current.rows.record(i).id: current.rows.record(i) for i in item.adjusts}
    on: list[Property] = []
    fresh: list[Record] = []
    for record in adjusted.values():
        for chain in record.state.properties:
            if chain.label == ADJUSTMENT:
                changing(txn, current, chain)
        held = pending_chains(record, chains)
        if not held:
            fresh.append(record)
        on.extend(p for p in held if p not in on)
    if fresh:
        new = mint(ADJUSTMENT, ADJUSTMENT_HINT)
        on.append(new)
        for record in fresh:
            # Asked now, so that a refusal names this input of a batch.
            joined(txn, record, [*chains.get(record.id, ()), new], (), "adjusted")
            chains.setdefault(record.id, []).append(new)
            payload = {"adjustment": str(new), "adjustedBy": record_id}
            links.setdefault(record.id, []).append(Event("adjusted", payload))
    return on


def _caller_properties(texts: Sequence[str]) -> list[Property]:
    properties = parse_properties(texts)
    reserved = sorted({p.label for p in properties if p.reserved})
    if reserved:
        raise ReservedLabelError(reserved)
    check_count(len(properties))
    return properties


def _metadata(texts: Sequence[str]) -> list[Property]:
    """`key:value` facts as the properties that hold them (under the metadata prefix)."""
    facts = parse_properties(texts)
    reserved = sorted({p.label for p in facts if p.reserved})
    if reserved:
        raise ReservedLabelError(reserved)
    return [Property(RULE.metadata_prefix + p.label, p.value) for p in facts]


def _clean_label(label: str) -> str:
    cleaned = label.strip().replace(" ", "_")
    if not cleaned:
        raise PropertyFormatError(label, "a label to remove is empty; name it, for example org")
    return cleaned


def _with_properties(state: RecordState, properties: Sequence[Property]) -> RecordState:
    return replace(state, properties=tuple(properties))


def _property_payload(record_id: str, prop: Property) -> dict[str, Any]:
    return {
        "property": str(prop),
        "label": prop.label,
        "value": prop.value,
        "edgePropertyId": edge_property_id(record_id, prop.label, prop.value),
    }
