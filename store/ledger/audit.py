"""An audit event: the report of one ledger entry, as the feed and the audit query give it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from store.ledger.entry import Row


@dataclass(frozen=True)
class AuditEvent:
    """One audit event, as the feed and the audit query give it."""

    seq: int
    id: str
    kind: str
    record_id: str | None
    lane: str | None
    actor: str
    at: datetime
    payload: Mapping[str, Any]
    version_before: int | None
    version_after: int | None
    object_kind: str = "record"  # the kind of ledger entry it reports

    @classmethod
    def from_row(cls, row: Row) -> AuditEvent:
        return cls(
            seq=row["seq"],
            id=row["id"],
            kind=row["kind"],
            record_id=row["record_id"],
            lane=row["lane"],
            actor=row["actor"],
            at=row["at"],
            payload=row["payload"],
            version_before=row["version_before"],
            version_after=row["version_after"],
            object_kind=row["object_kind"],
        )
