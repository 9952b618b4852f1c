"""Projection rules: (what a projection held, one ledger entry) -> the rows it holds after.

Pure functions, written once and used twice: the write path moves the live tables
with them inside the command's transaction, and `verify` replays the whole ledger
through them and compares the result with the live tables. These are the record
kind's (records, memberships, counts); each kind keeps its own beside it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Any

from store.ids import edge_property_id
from store.kinds.record.model import Record, RecordState
from store.ledger.entry import Entry


@dataclass(frozen=True)
class Membership:
    """One interval in which a record carried an edge property (a membership row)."""

    id: str
    record_id: str
    lane: str
    label: str
    value: str
    recorded_from: datetime
    from_version: int
    recorded_to: datetime | None = None
    to_version: int | None = None

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "record_id": self.record_id,
            "lane": self.lane,
            "label": self.label,
            "value": self.value,
            "recorded_from": self.recorded_from,
            "recorded_to": self.recorded_to,
            "from_version": self.from_version,
            "to_version": self.to_version,
        }


@dataclass(frozen=True)
class RecordDelta:
    """How one record entry moves the record projections."""

    record: Record
    closed: list[str] = field(default_factory=list)  # ep ids whose interval ends at the entry
    opened: list[Membership] = field(default_factory=list)


def project_record(before: Record | None, entry: Entry) -> RecordDelta:
    """The records row after `entry`, and the memberships it closes and opens.

    A retired record holds no membership: its tombstone closes every interval it held
    (at the retirement), and restoring it opens them again from then, so every read of
    memberships (gather, hyperedges, traverse, asserted edges, label counts) leaves it
    out while it is retired and shows it as it was at any earlier instant.
    """
    state = RecordState.from_json(entry.state)
    record = Record(
        id=entry.object_id,
        version=entry.version,
        state=state,
        created_at=before.created_at if before else entry.at,
        updated_at=entry.at,
        created_by=before.created_by if before else entry.actor,
        ledger_hash=entry.hash,
        retired_by=entry.actor if state.retired is not None else None,
    )
    held = {} if before is None else _by_id(before)
    now = _by_id(record)
    closed = [ep_id for ep_id in held if ep_id not in now]
    opened = [
        Membership(
            id=ep_id,
            record_id=record.id,
            lane=state.lane,
            label=prop.label,
            value=prop.value,
            recorded_from=entry.at,
            from_version=entry.version,
        )
        for ep_id, prop in now.items()
        if ep_id not in held
    ]
    return RecordDelta(record, closed, opened)


# The columns of a records row that the ledger determines (all but idempotency_key).
RECORD_COLUMNS = (
    "id",
    "lane",
    "source_type",
    "authority",
    "content",
    "properties",
    "version",
    "created_at",
    "updated_at",
    "created_by",
    "ledger_hash",
    "retired_at",
    "retired_by",
    "retired_reason",
    "expires_at",
)


def record_row(record: Record, idempotency_key: str | None = None) -> dict[str, Any]:
    """The records row a record projects to (the idempotency key is not in the ledger:
    the write path passes it for a new record, verify leaves it out)."""
    state = record.state
    return {
        "id": record.id,
        "lane": state.lane,
        "source_type": state.source_type,
        "authority": state.authority,
        "content": state.content,
        "properties": [[p.label, p.value] for p in state.properties],
        "version": record.version,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "created_by": record.created_by,
        "idempotency_key": idempotency_key,
        "ledger_hash": record.ledger_hash,
        "retired_at": record.updated_at if state.retired is not None else None,
        "retired_by": record.retired_by,
        "retired_reason": state.retired.reason if state.retired is not None else None,
        "expires_at": state.expires_at,
    }


def _by_id(record: Record) -> dict[str, Any]:
    return {edge_property_id(record.id, p.label, p.value): p for p in record.state.held()}


def label_changes(before: Record | None, after: Record, moved: Counter[tuple[str, str]]) -> None:
    """Add to `moved` how one record entry moves the per-label counts: +1 for each caller
    label the record now carries and did not, -1 for each it carried and no longer does."""
    held = set() if before is None else _labels(before)
    now = _labels(after)
    moved.update((after.lane, label) for label in now - held)
    for label in held - now:
        moved[(after.lane, label)] -= 1


def record_changes(before: Record | None, after: Record, moved: Counter[tuple[str, str]]) -> None:
    """Add to `moved` how one record entry moves the per-(lane, source type) counts of
    current records: +1 where the record now counts, -1 where it counted before and no
    longer does (a retired record is not current: its tombstone takes it out, restoring
    it puts it back). Keys may be left at 0."""
    for record, sign in ((before, -1), (after, 1)):
        if record is not None and record.state.retired is None:
            moved[(record.lane, record.state.source_type)] += sign


_MEMBER_KEY = attrgetter("lane", "label", "value")


def member_changes(
    before: Record | None, delta: RecordDelta, moved: Counter[tuple[str, str, str]]
) -> None:
    """Add to `moved` how one record entry moves the per-(lane, label, value) counts of
    current members, read off the memberships it closes and opens: whatever ends a
    membership ends its count, whatever opens one adds to it. Keys may be left at 0.
    `verify` rebuilds the member counts with it from the ledger; the write path derives
    its member deltas inside the append statement instead (`store.kinds.record.kind`)."""
    if delta.closed:
        assert before is not None
        held = _by_id(before)
        for ep_id in delta.closed:
            prop = held[ep_id]
            moved[(before.lane, prop.label, prop.value)] -= 1
    moved.update(map(_MEMBER_KEY, delta.opened))


def _labels(record: Record) -> set[str]:
    return {p.label for p in record.state.held() if not p.reserved}
