"""Forgetting a record, and bringing it back: retireRecord and restoreRecord.

A retired record is never deleted: its tombstone is a new version whose state keeps
its content and properties as they were, beside why it was retired. The projection
rule (`store.kinds.record.projection`) holds no membership for a retired record, so
the tombstone closes every edge-property interval the record held and the restoring
version opens them again; every read of memberships, and the label counts, follow from
that alone, and `verify` replays it with the same rule. Only an agent that may write
the record's lane may retire or restore it; a record it may not read is not found.
Retiring a record retires what other kinds attach to it (its typed edges) in the same
transaction; restoring it leaves them retired.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from policies.guard import NO_EXPIRY, ObjectChange, decide_object, lane_expiry
from policies.properties import Property
from store.errors import (
    AlreadyRetiredError,
    InvalidInputError,
    NotRestorableError,
    NotRetiredError,
)
from store.ids import ADJUSTMENT, CONNECT, GROUP, RECORD_KIND
from store.kinds.record.locks import Records, RecordsRead
from store.kinds.record.model import Record, Retired, next_version
from store.ledger.command import Current, Event, Locks, Plan, Txn, Write
from store.ledger.registry import kind_of, kinds
from store.limits import check_storable

MAX_REASON_CHARS = 10_000
ASSERTED_LABELS = (CONNECT, GROUP, ADJUSTMENT)


def retired_with(txn: Txn, current: Current[RecordsRead], records: Collection[str]) -> list[Write]:
    """The writes that retire, in the same transaction, what is attached to the records
    being retired (their typed edges), each as its kind says, once each. Restoring a
    record leaves them retired."""
    writes = []
    for kind_name, object_id in current.attached:
        kind = kind_of(kind_name)
        write = None if kind is None else kind.retired_with(txn, current, object_id, records)
        if write is not None:
            writes.append(write)
    return writes


def _check_reason(reason: str | None) -> None:
    if reason is not None:
        if len(reason) > MAX_REASON_CHARS:
            raise InvalidInputError(
                f"reason is {len(reason)} characters; at most {MAX_REASON_CHARS} are allowed",
                allowed=MAX_REASON_CHARS,
            )
        check_storable(reason)


def _retired(
    txn: Txn, current: Current[RecordsRead], idents: Sequence[str], reason: str | None
) -> list[Write]:
    """The tombstones of the records named, then what is attached to them."""
    writes = []
    for ident in idents:
        record = current.rows.record(ident)
        decide_object(txn.rules, txn.agent, ObjectChange(RECORD_KIND, record.id, record.lane))
        gone = record.retirement_at(txn.at)
        if gone is not None:
            raise AlreadyRetiredError(record.id, gone.at, gone.actor, gone.reason)
        state = replace(record.state, retired=Retired(reason))
        event = Event("sr_retired", {"reason": reason})
        writes.append(next_version(record, state, "sr_retired", [event]))
    return writes + retired_with(txn, current, {current.rows.record(i).id for i in idents})


def _attached_kinds() -> tuple[str, ...]:
    # What every kind attaches to a record (typed edges) is retired with it.
    return tuple(kind.name for kind in kinds())


@dataclass(frozen=True)
class RetireRecord:
    """Retire a record: a tombstone version, with a `sr_retired` event."""

    record_id: str
    reason: str | None = None

    def __post_init__(self) -> None:
        _check_reason(self.reason)

    def locks(self) -> Locks:
        return Records((self.record_id,), retired=True).locks(attached=_attached_kinds())

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Record]:
        writes = _retired(txn, current, (self.record_id,), self.reason)
        record_id = writes[0].object_id
        return Plan(writes, lambda applied: applied.records[record_id])


@dataclass(frozen=True)
class RetireRecords:
    """Retire several records, all or none, for one reason: each a tombstone version
    with its `sr_retired` event, and what is attached to any of them retired once."""

    record_ids: tuple[str, ...]
    reason: str | None = None

    def __post_init__(self) -> None:
        if len(set(self.record_ids)) != len(self.record_ids):
            raise InvalidInputError("each record may be named once")
        _check_reason(self.reason)

    def locks(self) -> Locks:
        return Records(self.record_ids, retired=True).locks(attached=_attached_kinds())

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[list[Record]]:
        writes = _retired(txn, current, self.record_ids, self.reason)
        ids = [w.object_id for w in writes[: len(self.record_ids)]]
        return Plan(writes, lambda applied: [applied.records[i] for i in ids])


@dataclass(frozen=True)
class RestoreRecord:
    """Bring a retired record back as it was: a new version, with a `sr_restored` event
    naming (`ended`) the connections, groups and chains that ended while it was retired,
    which it does not rejoin."""

    record_id: str

    def locks(self) -> Locks:
        # The holders of its connections, groups and chains: one that ended while it was
        # retired (nobody holds it now) is not restored with it.
        return Records((self.record_id,), retired=True, carried_by_records=ASSERTED_LABELS).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Record]:
        record = current.rows.record(self.record_id)
        decide_object(txn.rules, txn.agent, ObjectChange(RECORD_KIND, record.id, record.lane))
        if record.retirement_at(txn.at) is None:
            raise NotRetiredError(record.id)
        if record.state.erased is not None:
            raise NotRestorableError(record.id)
        ended = [p for p in record.state.properties if p.reserved and not _held(current, p)]
        kept = tuple(p for p in record.state.properties if p not in ended)
        # Restored, it expires no more, unless its lane gives its records a lifetime:
        # then that lifetime runs again from now.
        expires = lane_expiry(txn.rules.lane(record.lane), txn.at, NO_EXPIRY)
        state = replace(record.state, properties=kept, retired=None, expires_at=expires)
        event = Event("sr_restored", {"ended": [str(p) for p in ended]})
        write = next_version(record, state, "sr_restored", [event])
        return Plan((write,), lambda applied: applied.records[record.id])


def _held(current: Current[RecordsRead], prop: Property) -> bool:
    """Whether any record holds the value now (the restoring record holds none yet)."""
    key = (prop.label, prop.value)
    return bool(current.rows.holders.get(key)) or current.rows.hidden_holders.get(key, 0) > 0
