"""The correction kind's projection rule: its one entry is its corrections row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from store.ledger.entry import Entry


@dataclass(frozen=True)
class CorrectionRow:
    """One row of the corrections projection: a correction entry as read back."""

    id: str
    record_id: str
    record_version: int
    lane: str
    content: str
    reason: str | None
    actor: str
    at: datetime
    ledger_hash: str

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "record_id": self.record_id,
            "record_version": self.record_version,
            "lane": self.lane,
            "content": self.content,
            "reason": self.reason,
            "actor": self.actor,
            "at": self.at,
            "ledger_hash": self.ledger_hash,
        }


def project_correction(entry: Entry) -> CorrectionRow:
    """A correction is written once: its one entry is its row."""
    s = entry.state
    return CorrectionRow(
        id=entry.object_id,
        record_id=s["record_id"],
        record_version=s["record_version"],
        lane=s["lane"],
        content=s["content"],
        reason=s["reason"],
        actor=entry.actor,
        at=entry.at,
        ledger_hash=entry.hash,
    )
