"""Corrections: a statement attached to a record that leaves the record as it was.

A correction is a ledgered object of its own (kind "correction", id `co_` + 32 hex,
one entry), naming the record and the version it corrects; `corrections` is its
projection (`projection.project_correction`). Correcting needs write access to the
record's lane, decided by the same guard as every other write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from policies.guard import RecordChange, decide
from store import tables as t
from store.errors import InvalidInputError
from store.ids import new_correction_id
from store.kinds.correction.projection import CorrectionRow, project_correction
from store.ledger.command import Applied, Current, Event, Locks, Plan, Txn, Write
from store.limits import check_content, check_storable
from store.reads.core_sql import fetch
from store.reads.snapshot import Reader
from store.reads.visibility import CORE_AT, CORE_LANES, RULE, core

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
        return Locks(records=(self.record_id,))

    def decide(self, txn: Txn, current: Current) -> Plan[CorrectionRow]:
        record = current.record(self.record_id)
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

        def result(applied: Applied) -> CorrectionRow:
            [entry] = applied.entries
            return project_correction(entry)

        return Plan((write,), result)


async def corrections_of(
    db: Reader,
    record_ids: Sequence[str],
    lanes: Sequence[str],
    as_of: datetime | None = None,
) -> dict[str, list[CorrectionRow]]:
    """Each readable record's corrections, oldest first (those made by as_of, if given)."""
    c = t.corrections
    at = None if as_of is None else CORE_AT
    seen = core(RULE.correction(c.name, CORE_LANES, at), lanes=list(lanes))
    if as_of is not None:
        seen = seen.bindparams(as_of=as_of)
    query = select(c).where(c.c.record_id.in_(list(record_ids)), seen)
    found: dict[str, list[CorrectionRow]] = {rid: [] for rid in record_ids}
    for row in await fetch(db, query.order_by(c.c.record_id, c.c.at)):
        found[row["record_id"]].append(CorrectionRow(**row))
    return found
