"""Appending a command's writes: ledger entries, projections and audit events in one statement.

Every table's rows travel as one JSON parameter that PostgreSQL expands with
`jsonb_to_recordset`, and every data-modifying CTE runs whether or not the outer
query reads it: one round trip whatever the command wrote, one fixed statement text
that each connection prepares once. The statement is made from the registered kinds'
parts (`store.ledger.registry`): a new kind adds its parts there, not here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from store.errors import StoreError
from store.ids import new_event_id
from store.ledger import registry
from store.ledger.command import Txn, Write
from store.ledger.entry import Entry
from store.ledger.hashing import digest_hash, entry_hash, state_sha256
from store.ledger.registry import Cte, Rows, Writer
from store.pool import Conn

TICK = timedelta(microseconds=1)
# The hash format new entries are written in: 3 (over the state's digest). Entries an
# earlier edgeloom wrote are of format 2, which tests write again by setting it so.
WRITE_FORMAT = 3
_NONE: list[dict[str, Any]] = []

_ENTRIES = """
new_entries AS (
  INSERT INTO ledger (kind, object_id, version, event, actor, at, policy_version, state,
                      prev_hash, hash, hash_format, state_sha256)
  SELECT kind, object_id, version, event, actor, at, policy_version, state, prev_hash, hash,
         CASE WHEN state_sha256 IS NULL THEN 2 ELSE 3 END, state_sha256
  FROM jsonb_to_recordset($1::jsonb) AS x(kind text, object_id text, version int, event text,
       actor text, at timestamptz, policy_version int, state jsonb, prev_hash text, hash text,
       state_sha256 text)
)"""
_EVENTS = """
INSERT INTO audit_events (id, kind, record_id, lane, actor, at, payload, version_before,
                          version_after, object_kind, object_id)
SELECT id, kind, record_id, lane, actor, at, payload, version_before, version_after,
       object_kind, object_id
FROM jsonb_to_recordset($2::jsonb) AS x(id text, kind text, record_id text, lane text,
     actor text, at timestamptz, payload jsonb, version_before int, version_after int,
     object_kind text, object_id text)
"""


class UnknownKindError(StoreError):
    """A write of a ledger kind no module registered."""

    def __init__(self, kind: str) -> None:
        names = [k.name for k in registry.kinds()]
        super().__init__(f"no ledger kind '{kind}' is registered; the kinds are {names}")


def _statement(parts: Sequence[Cte]) -> tuple[str, tuple[str, ...]]:
    ctes = [_ENTRIES]
    taking: list[str] = []
    for cte in parts:
        body = cte.sql
        if cte.columns:
            number = 3 + len(taking)
            typed = ", ".join(f"{name} {sql_type}" for name, sql_type in cte.columns)
            body = body.replace("{rows}", f"jsonb_to_recordset(${number}::jsonb) AS x({typed})")
            taking.append(cte.name)
        ctes.append(f"\n{cte.name} AS (\n  {body}\n)")
    return "WITH" + ",".join(ctes) + _EVENTS, tuple(taking)


_built: tuple[int, str, tuple[str, ...]] = (-1, "", ())


def append_statement() -> tuple[str, tuple[str, ...]]:
    """The append statement for the registered kinds, and the parts whose rows it takes
    after the entries ($1) and events ($2), in parameter order. Its text is fixed for a
    registry generation, so each connection prepares it once."""
    global _built
    generation = registry.generation()
    if _built[0] != generation:
        text, taking = _statement([cte for kind in registry.kinds() for cte in kind.ctes])
        _built = (generation, text, taking)
    return _built[1], _built[2]


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
        "prev_hash": None if previous is None else previous.hash,
    }
    if WRITE_FORMAT == 2:
        return Entry(**fields, state=write.state, hash=entry_hash(**fields, state=write.state))
    # Hash format 3: the hash covers the state's digest, kept beside it.
    digest = state_sha256(write.state)
    return Entry(
        **fields,
        state=write.state,
        hash=digest_hash(**fields, state_digest=digest),
        state_sha256=digest,
    )


def build_rows(
    txn: Txn, writes: Sequence[Write], before: Mapping[str, Any]
) -> tuple[Rows, list[Entry], dict[str, Any]]:
    """Entries, projection rows and event rows for `writes`; `before` holds the records
    as they are (keyed by id) for the record writes that follow a version. Also the
    records as the writes leave them: the objects of the kind that locks rows
    (`Kind.row_locks`), which commands are handed (`Applied.records`)."""
    rows = Rows()
    entries: list[Entry] = []
    records: dict[str, Any] = {}
    writers: dict[str, tuple[Writer, bool]] = {}
    for write in writes:
        entry = entry_for(txn, write)
        entries.append(entry)
        rows.entries.append(entry.row())
        found = writers.get(write.kind)
        if found is None:
            kind = registry.kind_of(write.kind)
            if kind is None:
                raise UnknownKindError(write.kind)
            found = writers[write.kind] = (kind.writer(before), kind.row_locks() is not None)
        writer, locked_as_rows = found
        now = writer.add(write, entry, rows)
        if locked_as_rows:
            records[entry.object_id] = now
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
    for writer, _ in writers.values():
        writer.finish(rows)
    return rows, entries, records


async def append(conn: Conn, rows: Rows) -> None:
    statement, taking = append_statement()
    parts = rows.parts
    await conn.execute(
        statement, rows.entries, rows.events, *(parts.get(name, _NONE) for name in taking)
    )
