"""The correction kind: a statement attached to a record, written once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.kinds.correction.projection import CorrectionRow, project_correction
from store.ledger.entry import Entry
from store.ledger.implied import Implied, Links, Shared
from store.ledger.registry import Cte, KindDefaults, NewestRowReplay, RowWriter, Table, insert
from store.pool import Conn

NAME = "correction"
_ATTACHED = "SELECT id FROM corrections WHERE record_id = ANY($1::text[]) ORDER BY id"
# A correction is its own ledgered object attached to a record; the record is unchanged.
CORRECTION_EVENT_KINDS = ("corrected",)

_TYPED = (
    ("id", "text"),
    ("record_id", "text"),
    ("record_version", "int"),
    ("lane", "text"),
    ("content", "text"),
    ("reason", "text"),
    ("actor", "text"),
    ("at", "timestamptz"),
    ("ledger_hash", "text"),
)
_COLUMNS = tuple(c for c, _ in _TYPED)


@dataclass(frozen=True)
class CorrectionKind(KindDefaults):
    name: str = NAME
    prefix: str = "co_"
    ctes: tuple[Cte, ...] = (insert("new_corrections", "corrections", _TYPED),)
    tables: tuple[Table, ...] = (Table("corrections", _COLUMNS),)
    event_kinds: tuple[str, ...] = CORRECTION_EVENT_KINDS
    unique_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def writer(self, before: Mapping[str, Any]) -> RowWriter:
        return RowWriter(project_correction, "new_corrections")

    def replay(self, keep: bool) -> NewestRowReplay:
        return NewestRowReplay(
            keep, "correction", self.tables[0], project_correction, lambda r: CorrectionRow(**r)
        )

    async def ever_attached(self, conn: Conn, record_ids: Sequence[str]) -> list[str]:
        rows = await conn.fetch(_ATTACHED, list(record_ids))
        return [row["id"] for row in rows]

    def erased(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        # What it says of the record, and why, may quote the record's content.
        if state.get("content") == "" and state.get("reason") is None:
            return None
        return {**state, "content": "", "reason": None}

    def erased_rows(self) -> str | None:
        return "UPDATE corrections SET content = '', reason = NULL WHERE id = ANY($1::text[])"

    def implied(
        self, before: Mapping[str, Any] | None, entry: Entry, links: Links
    ) -> tuple[Shared, list[Implied]] | str:
        s = entry.state
        previous = None if entry.version == 1 else entry.version - 1
        payload = {
            "correctionId": entry.object_id,
            "recordVersion": s["record_version"],
            "reason": s["reason"],
        }
        return Shared(s["record_id"], s["lane"], previous), [Implied("corrected", payload)]


KIND = CorrectionKind()
