"""Appending a command's writes: ledger entries, projections and audit events in one statement.

Every table's rows travel as one JSON parameter that PostgreSQL expands with
`jsonb_to_recordset`, and every data-modifying CTE runs whether or not the outer
query reads it: one round trip whatever the command wrote, one fixed statement text
that each connection prepares once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from store.command import Txn, Write
from store.hashing import entry_hash
from store.ids import new_event_id
from store.pool import Conn
from store.projection import (
    Entry,
    PolicyRow,
    label_changes,
    project_correction,
    project_policy,
    project_record,
    record_row,
)
from store.records import Record

TICK = timedelta(microseconds=1)

APPEND = """
WITH
new_entries AS (
  INSERT INTO ledger (kind, object_id, version, event, actor, at, policy_version, state,
                      prev_hash, hash)
  SELECT kind, object_id, version, event, actor, at, policy_version, state, prev_hash, hash
  FROM jsonb_to_recordset($1::jsonb) AS x(kind text, object_id text, version int, event text,
       actor text, at timestamptz, policy_version int, state jsonb, prev_hash text, hash text)
),
moved_records AS (
  INSERT INTO records AS r (id, lane, source_type, authority, content, properties, version,
                            created_at, updated_at, created_by, idempotency_key, ledger_hash)
  SELECT id, lane, source_type, authority, content, properties, version, created_at,
         updated_at, created_by, idempotency_key, ledger_hash
  FROM jsonb_to_recordset($2::jsonb) AS x(id text, lane text, source_type text, authority text,
       content text, properties jsonb, version int, created_at timestamptz,
       updated_at timestamptz, created_by text, idempotency_key text, ledger_hash text)
  ON CONFLICT (id) DO UPDATE SET
    lane = EXCLUDED.lane, source_type = EXCLUDED.source_type, authority = EXCLUDED.authority,
    content = EXCLUDED.content, properties = EXCLUDED.properties, version = EXCLUDED.version,
    updated_at = EXCLUDED.updated_at, ledger_hash = EXCLUDED.ledger_hash
),
closed_memberships AS (
  UPDATE edge_properties m SET recorded_to = x.at, to_version = x.version
  FROM jsonb_to_recordset($3::jsonb) AS x(id text, record_id text, at timestamptz, version int)
  WHERE m.record_id = x.record_id AND m.id = x.id AND m.recorded_to IS NULL
),
opened_memberships AS (
  INSERT INTO edge_properties (id, record_id, lane, label, value, recorded_from, recorded_to,
                               from_version, to_version)
  SELECT id, record_id, lane, label, value, recorded_from, NULL, from_version, NULL
  FROM jsonb_to_recordset($4::jsonb) AS x(id text, record_id text, lane text, label text,
       value text, recorded_from timestamptz, from_version int)
),
new_policies AS (
  INSERT INTO policy_versions (version, yaml, applied_at, applied_by)
  SELECT version, yaml, applied_at, applied_by
  FROM jsonb_to_recordset($5::jsonb) AS x(version int, yaml text, applied_at timestamptz,
       applied_by text)
  RETURNING version
),
moved_head AS (
  UPDATE policy_head SET version = p.version
  FROM (SELECT max(version) AS version FROM new_policies) p
  WHERE id = 1 AND p.version IS NOT NULL
),
new_corrections AS (
  INSERT INTO corrections (id, record_id, record_version, lane, content, reason, actor, at,
                           ledger_hash)
  SELECT id, record_id, record_version, lane, content, reason, actor, at, ledger_hash
  FROM jsonb_to_recordset($7::jsonb) AS x(id text, record_id text, record_version int,
       lane text, content text, reason text, actor text, at timestamptz, ledger_hash text)
),
new_label_deltas AS (
  INSERT INTO label_deltas (lane, label, delta)
  SELECT lane, label, delta
  FROM jsonb_to_recordset($8::jsonb) AS x(lane text, label text, delta int)
)
INSERT INTO audit_events (id, kind, record_id, lane, actor, at, payload, version_before,
                          version_after, object_kind, object_id)
SELECT id, kind, record_id, lane, actor, at, payload, version_before, version_after,
       object_kind, object_id
FROM jsonb_to_recordset($6::jsonb) AS x(id text, kind text, record_id text, lane text,
     actor text, at timestamptz, payload jsonb, version_before int, version_after int,
     object_kind text, object_id text)
"""


@dataclass
class Rows:
    """The rows one command appends, table by table."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    closed: list[dict[str, Any]] = field(default_factory=list)
    opened: list[dict[str, Any]] = field(default_factory=list)
    policies: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    corrections: list[dict[str, Any]] = field(default_factory=list)
    label_deltas: list[dict[str, Any]] = field(default_factory=list)

    def extend(self, other: Rows) -> None:
        """Add another command's rows (group commit appends several commands at once)."""
        for name, mine in vars(self).items():
            mine.extend(getattr(other, name))


def entry_for(txn: Txn, write: Write) -> Entry:
    """The ledger entry for `write`, chained to its previous head and hashed."""
    previous = write.previous
    # Versions of one object are ordered in time even when this transaction started
    # before the one that wrote its current version.
    at = txn.at if previous is None else max(txn.at, previous.at + TICK)
    fields: dict[str, Any] = {
        "kind": write.kind,
        "object_id": write.object_id,
        "version": 1 if previous is None else previous.version + 1,
        "event": write.event,
        "actor": txn.agent_name,
        "at": at,
        "policy_version": txn.policy_version,
        "state": write.state,
        "prev_hash": None if previous is None else previous.hash,
    }
    return Entry(**fields, hash=entry_hash(**fields))


def build_rows(
    txn: Txn, writes: Sequence[Write], before: Mapping[str, Record]
) -> tuple[Rows, list[Entry], dict[str, Record]]:
    """Entries, projection rows and event rows for `writes`; `before` holds the records
    as they are (keyed by id) for the record writes that follow a version."""
    rows = Rows()
    entries: list[Entry] = []
    records: dict[str, Record] = {}
    # One delta row per (lane, label) a command moves, however many records it wrote.
    labels: Counter[tuple[str, str]] = Counter()
    for write in writes:
        entry = entry_for(txn, write)
        entries.append(entry)
        rows.entries.append(entry.row())
        if write.kind == "record":
            was = records.get(write.object_id, before.get(write.object_id))
            delta = project_record(was, entry)
            labels.update(label_changes(was, delta.record))
            records[entry.object_id] = delta.record
            rows.records.append(record_row(delta.record, write.idempotency_key))
            rows.closed.extend(
                {"id": ep, "record_id": entry.object_id, "at": entry.at, "version": entry.version}
                for ep in delta.closed
            )
            rows.opened.extend(m.row() for m in delta.opened)
        elif write.kind == "policy":
            policy: PolicyRow = project_policy(entry)
            rows.policies.append(policy.row())
        elif write.kind == "correction":
            rows.corrections.append(project_correction(entry).row())
        rows.events.extend(
            {
                "id": new_event_id(),
                "kind": event.kind,
                "record_id": write.record_id,
                "lane": write.lane,
                "actor": entry.actor,
                "at": entry.at,
                "payload": event.payload,
                "version_before": write.previous.version if write.previous else None,
                "version_after": entry.version,
                "object_kind": entry.kind,
                "object_id": entry.object_id,
            }
            for event in write.events
        )
    rows.label_deltas.extend(
        {"lane": lane, "label": label, "delta": n} for (lane, label), n in labels.items() if n
    )
    return rows, entries, records


async def append(conn: Conn, rows: Rows) -> None:
    await conn.execute(
        APPEND,
        rows.entries,
        rows.records,
        rows.closed,
        rows.opened,
        rows.policies,
        rows.events,
        rows.corrections,
        rows.label_deltas,
    )
