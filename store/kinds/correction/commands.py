"""Corrections: a statement attached to a record that leaves the record as it was.

A correction is a ledgered object of its own (kind "correction", id `co_` + 32 hex,
one entry), naming the record and the version it corrects; `corrections` is its
projection (`projection.project_correction`). Correcting needs write access to the
record's lane, decided by the same guard as every other write.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.guard import RecordChange, decide
from store.errors import InvalidInputError
from store.ids import new_correction_id
from store.kinds.correction.projection import CorrectionRow, project_correction
from store.kinds.record.locks import Records, RecordsRead
from store.kinds.record.model import Record
from store.ledger.command import Applied, Current, Event, Locks, Plan, Txn, Write
from store.limits import check_content, check_storable

MAX_REASON_CHARS = 10_000


@dataclass(frozen=True)
class Correct:
    """Attach a correction to a record: what is right instead, and why."""

    record_id: str
    content: str
    reason: str | None = None

    def __post_init__(self) -> None:
        if not self.content.strip():
            raise InvalidInputError("a correction needs content: say what is right instead")
        check_content(self.content)
        if self.reason is not None:
            if len(self.reason) > MAX_REASON_CHARS:
                raise InvalidInputError(
                    f"reason is {len(self.reason)} characters; at most {MAX_REASON_CHARS} "
                    "are allowed",
                    allowed=MAX_REASON_CHARS,
                )
            check_storable(self.reason)

    def locks(self) -> Locks:
        # The record is locked so the version a correction names is the current one.
        return Records((self.record_id,)).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[CorrectionRow]:
        record = current.rows.record(self.record_id)
        s = record.state
        decide(txn.rules, txn.agent, RecordChange(s.lane, s.source_type, authority=s.authority))
        correction_id = new_correction_id()
        state = {
            "record_id": record.id,
            "record_version": record.version,
            "lane": record.lane,
            "content": self.content,
            "reason": self.reason,
        }
        payload = {
            "correctionId": correction_id,
            "recordVersion": record.version,
            "reason": self.reason,
        }
        write = Write(
            kind="correction",
            object_id=correction_id,
            event="corrected",
            state=state,
            previous=None,
            events=(Event("corrected", payload),),
            lane=record.lane,
            record_id=record.id,
        )

        def result(applied: Applied[Record]) -> CorrectionRow:
            [entry] = applied.entries
            return project_correction(entry)

        return Plan((write,), result)
