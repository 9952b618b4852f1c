"""Checking the ledger: chains, checkpoints and events hold, and the projections equal a
rebuild from the ledger made with the same projection rules the write path uses.

Everything is read in one REPEATABLE READ, READ ONLY, DEFERRABLE transaction: one
snapshot, so writers running meanwhile never look like tampering.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from store import checkpoints
from store.checkpoints import Checkpoint, covered_hashes
from store.hashing import entry_hash, legacy_entry_hash
from store.policy_store import HEAD_SQL
from store.pool import Conn, connect
from store.projection import (
    RECORD_COLUMNS,
    CorrectionRow,
    Entry,
    Membership,
    PolicyRow,
    label_changes,
    project_correction,
    project_policy,
    project_record,
    record_row,
)
from store.records import Record
from store.signing import Signer

_LEDGER = """
SELECT kind, object_id, version, event, actor, at, policy_version, state, prev_hash, hash,
       hash_format
FROM ledger ORDER BY kind, object_id, version
"""
_RECORDS = """
SELECT id, lane, source_type, authority, content, properties, version, created_at, updated_at,
       created_by, ledger_hash
FROM records
"""
_MEMBERSHIPS = """
SELECT id, record_id, lane, label, value, recorded_from, from_version, recorded_to, to_version
FROM edge_properties
"""
_POLICIES = "SELECT version, yaml, applied_at, applied_by FROM policy_versions ORDER BY version"
_CORRECTIONS = """
SELECT id, record_id, record_version, lane, content, reason, actor, at, ledger_hash
FROM corrections
"""
_LABEL_COUNTS = """
SELECT lane, label, sum(n)::bigint AS n FROM (
  SELECT lane, label, records AS n FROM label_counts
  UNION ALL SELECT lane, label, delta FROM label_deltas
) c GROUP BY lane, label HAVING sum(n) <> 0
"""
_ENTRIES_WITHOUT_EVENTS = """
SELECT l.kind, l.object_id, l.version FROM ledger l
WHERE NOT EXISTS (SELECT 1 FROM audit_events e WHERE e.object_kind = l.kind
                  AND e.object_id = l.object_id AND e.version_after = l.version)
ORDER BY l.seq LIMIT 50
"""
_EVENTS_WITHOUT_ENTRIES = """
SELECT e.id, e.object_kind, e.object_id, e.version_after FROM audit_events e
WHERE NOT EXISTS (SELECT 1 FROM ledger l WHERE l.kind = e.object_kind
                  AND l.object_id = e.object_id AND l.version = e.version_after)
ORDER BY e.seq LIMIT 50
"""
_NEXT_TXID = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
_UNCOVERED = """
SELECT seq FROM ledger WHERE txid < $1::text::xid8 AND NOT seq <@ $2::text::int8multirange
ORDER BY seq
"""
_RECORD_COLUMNS = RECORD_COLUMNS[1:]  # every column but the id compared on


@dataclass
class Report:
    """What verify found; `problems` is empty when everything holds."""

    records: int = 0
    entries: int = 0
    memberships: int = 0
    checkpoints: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class _Rebuild:
    records: dict[str, Record] = field(default_factory=dict)
    memberships: set[Membership] = field(default_factory=set)
    policies: list[PolicyRow] = field(default_factory=list)
    corrections: dict[str, CorrectionRow] = field(default_factory=dict)


async def verify(url: str, signer: Signer | None = None) -> Report:
    """Replay the whole ledger and compare it with the live projections; with the
    checkpoint key, check every checkpoint's signature and that none was removed."""
    report = Report()
    # Read before the snapshot is taken: a checkpoint is recorded beside the key only once
    # it has committed, so the snapshot holds the one read here (or a newer one).
    head = None if signer is None else signer.newest()
    conn = await connect(url)
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True, deferrable=True):
            rebuilt = await _replay(conn, report)
            await _compare_records(conn, rebuilt, report)
            await _compare_memberships(conn, rebuilt, report)
            await _compare_policies(conn, rebuilt, report)
            await _compare_corrections(conn, rebuilt, report)
            await _compare_label_counts(conn, rebuilt, report)
            await _check_events(conn, report)
            await _check_checkpoints(conn, report, signer, head)
    finally:
        await conn.close()
    return report


async def _replay(conn: Conn, report: Report) -> _Rebuild:
    rebuilt = _Rebuild()
    chain_of: list[asyncpg.Record] = []
    async for row in conn.cursor(_LEDGER, prefetch=2000):
        report.entries += 1
        if chain_of and (chain_of[0]["kind"], chain_of[0]["object_id"]) != (
            row["kind"],
            row["object_id"],
        ):
            _replay_object(chain_of, rebuilt, report)
            chain_of = []
        chain_of.append(row)
    if chain_of:
        _replay_object(chain_of, rebuilt, report)
    return rebuilt


def _replay_object(rows: list[asyncpg.Record], rebuilt: _Rebuild, report: Report) -> None:
    """Check one object's chain and move the rebuilt projections through its entries."""
    kind, object_id = rows[0]["kind"], rows[0]["object_id"]
    name = object_id if kind == "record" else f"{kind} {object_id}"
    prev_hash: str | None = None
    record: Record | None = None
    opened: dict[str, Membership] = {}
    for number, row in enumerate(rows, start=1):
        entry = Entry.from_row(row)
        if entry.version != number:
            report.problems.append(f"{name}: version {entry.version} where {number} was expected")
        if entry.prev_hash != prev_hash:
            report.problems.append(f"{name} v{entry.version}: prev_hash breaks the chain")
        if _hash(entry, row["hash_format"]) != entry.hash:
            report.problems.append(f"{name} v{entry.version}: hash does not match content")
        prev_hash = entry.hash
        if kind == "record":
            delta = project_record(record, entry)
            record = delta.record
            for ep_id in delta.closed:
                was = opened.pop(ep_id)
                rebuilt.memberships.add(
                    Membership(**{**was.row(), "recorded_to": entry.at, "to_version": number})
                )
            opened.update((m.id, m) for m in delta.opened)
        elif kind == "policy":
            rebuilt.policies.append(project_policy(entry))
        elif kind == "correction":
            rebuilt.corrections[object_id] = project_correction(entry)
        else:
            report.problems.append(f"{name}: no projection rule for ledger kind '{kind}'")
    if record is not None:
        rebuilt.records[record.id] = record
        rebuilt.memberships.update(opened.values())


def _hash(entry: Entry, hash_format: int) -> str:
    fields: dict[str, Any] = {
        "object_id": entry.object_id,
        "version": entry.version,
        "event": entry.event,
        "actor": entry.actor,
        "at": entry.at,
        "policy_version": entry.policy_version,
        "state": entry.state,
        "prev_hash": entry.prev_hash,
    }
    if hash_format == 1:
        return legacy_entry_hash(**fields)
    return entry_hash(kind=entry.kind, **fields)


async def _compare_records(conn: Conn, rebuilt: _Rebuild, report: Report) -> None:
    live: dict[str, asyncpg.Record] = {}
    async for row in conn.cursor(_RECORDS, prefetch=2000):
        live[row["id"]] = row
    report.records = len(live)
    for record_id in sorted(rebuilt.records.keys() - live.keys()):
        report.problems.append(f"{record_id}: in the ledger but missing from records")
    for record_id in sorted(live.keys() - rebuilt.records.keys()):
        report.problems.append(f"{record_id}: in records but has no ledger entry")
    for record_id in sorted(rebuilt.records.keys() & live.keys()):
        expected = record_row(rebuilt.records[record_id])
        for column in _RECORD_COLUMNS:
            if live[record_id][column] != expected[column]:
                report.problems.append(f"{record_id}: records.{column} differs from the ledger")


async def _compare_memberships(conn: Conn, rebuilt: _Rebuild, report: Report) -> None:
    live: set[Membership] = set()
    async for row in conn.cursor(_MEMBERSHIPS, prefetch=5000):
        live.add(Membership(**dict(row)))
    report.memberships = len(live)
    for m in sorted(rebuilt.memberships - live, key=str)[:50]:
        report.problems.append(
            f"{m.record_id}: membership {m.label}:{m.value} missing from the projection"
        )
    for m in sorted(live - rebuilt.memberships, key=str)[:50]:
        report.problems.append(f"{m.record_id}: membership {m.label}:{m.value} not in the ledger")


async def _compare_policies(conn: Conn, rebuilt: _Rebuild, report: Report) -> None:
    live = [PolicyRow(*row) for row in await conn.fetch(_POLICIES)]
    if live != rebuilt.policies:
        report.problems.append("policy_versions differs from the ledger's policy entries")
    head = await conn.fetchval(HEAD_SQL)
    newest = rebuilt.policies[-1].version if rebuilt.policies else 0
    if head != newest:
        report.problems.append(f"policy_head names version {head}; the ledger's newest is {newest}")


async def _compare_corrections(conn: Conn, rebuilt: _Rebuild, report: Report) -> None:
    live = {row["id"]: CorrectionRow(**dict(row)) for row in await conn.fetch(_CORRECTIONS)}
    for ident in sorted(rebuilt.corrections.keys() - live.keys()):
        report.problems.append(f"correction {ident}: in the ledger but missing from corrections")
    for ident in sorted(live.keys() - rebuilt.corrections.keys()):
        report.problems.append(f"correction {ident}: in corrections but has no ledger entry")
    for ident in sorted(live.keys() & rebuilt.corrections.keys()):
        if live[ident] != rebuilt.corrections[ident]:
            report.problems.append(f"correction {ident}: differs from its ledger entry")


async def _compare_label_counts(conn: Conn, rebuilt: _Rebuild, report: Report) -> None:
    """The folded counts plus the unfolded deltas equal a count of the rebuilt records."""
    expected: Counter[tuple[str, str]] = Counter()
    for record in rebuilt.records.values():
        expected.update(label_changes(None, record))
    live = {(row["lane"], row["label"]): row["n"] for row in await conn.fetch(_LABEL_COUNTS)}
    for key in sorted(expected.keys() | live.keys()):
        if expected.get(key, 0) != live.get(key, 0):
            lane, label = key
            report.problems.append(
                f"label '{label}' in lane '{lane}': counted {live.get(key, 0)} records, "
                f"the ledger has {expected.get(key, 0)}"
            )


async def _check_events(conn: Conn, report: Report) -> None:
    """Every entry has the events that report it, and no event lacks its entry."""
    for kind, object_id, version in await conn.fetch(_ENTRIES_WITHOUT_EVENTS):
        report.problems.append(f"{object_id} v{version}: {kind} entry has no audit event")
    for event_id, kind, object_id, version in await conn.fetch(_EVENTS_WITHOUT_ENTRIES):
        report.problems.append(
            f"{object_id} v{version}: audit event {event_id} reports a {kind} entry "
            "the ledger does not hold"
        )


async def _check_checkpoints(
    conn: Conn, report: Report, signer: Signer | None, head: tuple[int, str] | None
) -> None:
    """Recompute every checkpoint from the entries it covers, check that they follow one
    another and cover every entry older than the newest one's range exactly once; with the
    key, check every signature and the newest checkpoint recorded beside it (`head`)."""
    made = [Checkpoint.from_row(row) for row in await conn.fetch(checkpoints.ALL)]
    prev: Checkpoint | None = None
    for checkpoint in made:
        report.checkpoints += 1
        hashes = await covered_hashes(conn, checkpoint.covers)
        report.problems.extend(checkpoints.problems(checkpoint, prev, hashes))
        prev = checkpoint
    report.problems.extend(checkpoints.overlaps(made))
    if made:
        await _check_coverage(conn, made, report)
    if signer is not None:
        report.problems.extend(checkpoints.signature_problems(made, signer))
    seen = {c.seq: c.hash for c in made}
    if head is not None and seen.get(head[0]) != head[1]:
        report.problems.append(
            f"checkpoint {head[0]}, recorded beside the key as signed, is missing or "
            "differs: checkpoints were removed or rewritten"
        )


async def _check_coverage(conn: Conn, made: list[Checkpoint], report: Report) -> None:
    """Every entry of a transaction below the newest checkpoint's range is covered: one
    that is not was inserted after its range was anchored (or the range was moved)."""
    newest = made[-1]
    problem = checkpoints.horizon_problem(newest, await conn.fetchval(_NEXT_TXID))
    if problem is not None:
        report.problems.append(problem)
    shown = 0
    async for row in conn.cursor(_UNCOVERED, str(newest.below_txid), checkpoints.covered_set(made)):
        shown += 1
        if shown <= 50:
            report.problems.append(
                f"ledger position {row['seq']}: no checkpoint covers it, though its transaction "
                f"is older than checkpoint {newest.seq}'s range: it was inserted into history "
                "after that range was anchored"
            )
    if shown > 50:
        report.problems.append(f"{shown - 50} more ledger positions no checkpoint covers")
