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

from dataclasses import dataclass, replace

from policies.guard import ObjectChange, decide_object
from policies.properties import Property
from store.errors import AlreadyRetiredError, InvalidInputError, NotRetiredError
from store.ids import ADJUSTMENT, CONNECT, GROUP, RECORD_KIND
from store.kinds import kind_of, kinds
from store.kinds.record.model import Record, Retired
from store.ledger.command import Current, Event, Locks, Plan, Txn, Write, next_version
from store.limits import check_storable

MAX_REASON_CHARS = 10_000
ASSERTED_LABELS = (CONNECT, GROUP, ADJUSTMENT)


def retired_with(txn: Txn, current: Current) -> list[Write]:
    """The writes that retire, in the same transaction, what is attached to the record
    being retired (its typed edges), each as its kind says. Restoring a record leaves
    them retired."""
    writes = []
    for kind_name, object_id in current.attached:
        kind = kind_of(kind_name)
        write = None if kind is None else kind.retired_with(txn, current, object_id)
        if write is not None:
            writes.append(write)
    return writes


@dataclass(frozen=True)
class RetireRecord:
    """Retire a record: a tombstone version, with a `sr_retired` event."""

    record_id: str
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.reason is not None:
            if len(self.reason) > MAX_REASON_CHARS:
                raise InvalidInputError(
                    f"reason is {len(self.reason)} characters; at most {MAX_REASON_CHARS} "
                    "are allowed",
                    allowed=MAX_REASON_CHARS,
                )
            check_storable(self.reason)

    def locks(self) -> Locks:
        # What every kind attaches to the record (typed edges) is retired with it.
        attached = tuple(kind.name for kind in kinds())
        return Locks(records=(self.record_id,), retired=True, attached=attached)

    def decide(self, txn: Txn, current: Current) -> Plan[Record]:
        record = current.record(self.record_id)
        decide_object(txn.rules, txn.agent, ObjectChange(RECORD_KIND, record.id, record.lane))
        gone = record.retirement
        if gone is not None:
            raise AlreadyRetiredError(record.id, gone.at, gone.actor, gone.reason)
        state = replace(record.state, retired=Retired(self.reason))
        event = Event("sr_retired", {"reason": self.reason})
        writes = [next_version(record, state, "sr_retired", [event])]
        writes += retired_with(txn, current)
        return Plan(writes, lambda applied: applied.records[record.id])


@dataclass(frozen=True)
class RestoreRecord:
    """Bring a retired record back as it was: a new version, with a `sr_restored` event
    naming (`ended`) the connections, groups and chains that ended while it was retired,
    which it does not rejoin."""

    record_id: str

    def locks(self) -> Locks:
        # The holders of its connections, groups and chains: one that ended while it was
        # retired (nobody holds it now) is not restored with it.
        return Locks(records=(self.record_id,), retired=True, carried_by_records=ASSERTED_LABELS)

    def decide(self, txn: Txn, current: Current) -> Plan[Record]:
        record = current.record(self.record_id)
        decide_object(txn.rules, txn.agent, ObjectChange(RECORD_KIND, record.id, record.lane))
        if record.retirement is None:
            raise NotRetiredError(record.id)
        ended = [p for p in record.state.properties if p.reserved and not _held(current, p)]
        kept = tuple(p for p in record.state.properties if p not in ended)
        state = replace(record.state, properties=kept, retired=None)
        event = Event("sr_restored", {"ended": [str(p) for p in ended]})
        write = next_version(record, state, "sr_restored", [event])
        return Plan((write,), lambda applied: applied.records[record.id])


def _held(current: Current, prop: Property) -> bool:
    """Whether any record holds the value now (the restoring record holds none yet)."""
    key = (prop.label, prop.value)
    return bool(current.holders.get(key)) or current.hidden_holders.get(key, 0) > 0
