"""The correction kind: a statement attached to a record, written once."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.kinds import Copy, Cte, KindDefaults, Rows, Table, compare_rows, insert
from store.kinds.record.model import Record
from store.kinds.record.projection import CorrectionRow, Entry, project_correction
from store.ledger.command import Write
from store.ledger.events import CORRECTION_EVENT_KINDS
from store.ledger.implied import Implied, Links, Shared
from store.operations.verify import Report
from store.pool import Conn

NAME = "correction"

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
_CORRECTIONS = f"SELECT {', '.join(_COLUMNS)} FROM corrections"


class _Writer:
    def add(self, write: Write, entry: Entry, rows: Rows) -> CorrectionRow:
        correction = project_correction(entry)
        rows.part("new_corrections").append(correction.row())
        return correction

    def finish(self, rows: Rows) -> None:
        pass


class _Replay:
    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.corrections: dict[str, CorrectionRow] = {}

    def object(self, entries: Sequence[Entry]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        for entry in entries:
            correction = project_correction(entry)
            if self.keep:
                self.corrections[entry.object_id] = correction
            row = correction.row()
            yield "corrections", tuple(row[c] for c in _COLUMNS)

    async def compare(self, conn: Conn, report: Report) -> None:
        live = {row["id"]: CorrectionRow(**dict(row)) for row in await conn.fetch(_CORRECTIONS)}
        rebuilt = self.corrections
        compare_rows(report, "correction", "corrections", live, rebuilt)

    async def finish(self, conn: Conn, copy: Copy) -> None:
        pass


@dataclass(frozen=True)
class CorrectionKind(KindDefaults):
    name: str = NAME
    prefix: str = "co_"
    ctes: tuple[Cte, ...] = (insert("new_corrections", "corrections", _TYPED),)
    tables: tuple[Table, ...] = (Table("corrections", _COLUMNS),)
    event_kinds: tuple[str, ...] = CORRECTION_EVENT_KINDS
    unique_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def writer(self, before: Mapping[str, Record]) -> _Writer:
        return _Writer()

    def replay(self, keep: bool) -> _Replay:
        return _Replay(keep)

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
