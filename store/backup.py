"""Export and import: the whole memory as a portable, streaming file.

The file is gzip-compressed JSON Lines (README, "Backups"): a header line, then one
object per line: `entry` (every ledger entry, by kind, object and version), `key`
(idempotency keys, which live beside the ledger), `event` (every audit event, in feed
order), `checkpoint`, `token` (hashes only, never secrets), and a closing `end` line
with the counts, so a truncated file is refused rather than half-imported.

Export reads one snapshot (REPEATABLE READ, READ ONLY, DEFERRABLE) while writers run.
Import fills an empty database in one transaction: it copies the ledger, rebuilds every
projection with the write path's projection rules, and anchors the imported entries in
a checkpoint of the new cluster, so ids, versions, hashes and every asOf answer are the
same and `verify` passes.
"""

from __future__ import annotations

import gzip
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from store import checkpoints
from store.errors import StoreError
from store.pool import Conn, connect
from store.projection import (
    RECORD_COLUMNS,
    CorrectionRow,
    Entry,
    Membership,
    label_changes,
    project_correction,
    project_policy,
    project_record,
    record_row,
)
from store.records import Record
from store.signing import Signer

FORMAT = "edgeloom-export"
VERSION = 1
_BATCH = 5000

Progress = Callable[[int, int], None]

_SOURCES: dict[str, tuple[str, str]] = {
    "entry": (
        "SELECT count(*) FROM ledger",
        "SELECT seq, kind, object_id, version, event, actor, at, policy_version, state, "
        "prev_hash, hash, hash_format FROM ledger ORDER BY kind, object_id, version",
    ),
    "key": (
        "SELECT count(*) FROM records WHERE idempotency_key IS NOT NULL",
        "SELECT id, idempotency_key FROM records WHERE idempotency_key IS NOT NULL ORDER BY id",
    ),
    "event": (
        "SELECT count(*) FROM audit_events",
        "SELECT seq, id, kind, record_id, lane, actor, at, payload, version_before, "
        "version_after, object_kind, object_id FROM audit_events ORDER BY seq",
    ),
    "checkpoint": (
        "SELECT count(*) FROM checkpoints",
        "SELECT seq, below_txid::text::bigint AS below_txid, entries, covers, at, prev_hash, "
        "hash, signature, key_id, signed_format FROM checkpoints ORDER BY seq",
    ),
    "token": (
        "SELECT count(*) FROM tokens",
        "SELECT id, agent, token_hash, created_at, revoked_at FROM tokens ORDER BY id",
    ),
}


class BackupError(StoreError):
    """An export or import that cannot proceed; the message says why and what to do."""


@dataclass
class Summary:
    counts: dict[str, int] = field(default_factory=dict)
    checkpoint: int | None = None


def _dumps(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value) + b"\n"


async def export(url: str, path: Path, progress: Progress | None = None) -> Summary:
    """Write the memory at `url` to `path` (replaced only once the file is complete)."""
    conn = await connect(url)
    tmp = path.with_name(path.name + ".partial")
    summary = Summary()
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True, deferrable=True):
            totals = {t: int(await conn.fetchval(q)) for t, (q, _) in _SOURCES.items()}
            total, done = sum(totals.values()), 0
            revision = await conn.fetchval("SELECT version_num FROM alembic_version")
            with gzip.open(tmp, "wb", compresslevel=6) as out:
                header = {
                    "t": "header",
                    "format": FORMAT,
                    "version": VERSION,
                    "schema": revision,
                    "exportedAt": await conn.fetchval("SELECT clock_timestamp()"),
                    "counts": totals,
                }
                out.write(_dumps(header))
                for kind, (_, query) in _SOURCES.items():
                    n = 0
                    async for row in conn.cursor(query, prefetch=_BATCH):
                        out.write(_dumps({"t": kind, **dict(row)}))
                        n += 1
                        done += 1
                        if progress is not None and done % _BATCH == 0:
                            progress(done, total)
                    summary.counts[kind] = n
                out.write(_dumps({"t": "end", "counts": summary.counts}))
        os.replace(tmp, path)
    finally:
        await conn.close()
        tmp.unlink(missing_ok=True)
    if progress is not None:
        progress(total, total)
    return summary


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    """The export's lines, parsed; a damaged file is a refusal that names the line."""
    try:
        with gzip.open(path, "rb") as handle:
            for number, line in enumerate(handle, start=1):
                try:
                    value = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise BackupError(f"{path} line {number} is not JSON: {exc}") from exc
                if not isinstance(value, dict) or "t" not in value:
                    raise BackupError(f"{path} line {number} is not an export line")
                yield value
    except (OSError, EOFError) as exc:
        raise BackupError(f"cannot read '{path}' as a complete gzip file: {exc}") from exc


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)


class _Importer:
    """Buffers rows per table and copies them in batches; replays entries per object."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.buffers: dict[str, list[tuple[Any, ...]]] = {}
        self.object: list[Entry] = []
        self.keys: list[tuple[str, str]] = []
        self.labels: Counter[tuple[str, str]] = Counter()

    async def add(self, table: str, row: tuple[Any, ...]) -> None:
        buffer = self.buffers.setdefault(table, [])
        buffer.append(row)
        if len(buffer) >= _BATCH:
            await self.flush(table)

    async def flush(self, table: str | None = None) -> None:
        for name in [table] if table else list(self.buffers):
            rows = self.buffers.pop(name, [])
            if rows:
                await self.conn.copy_records_to_table(
                    name, records=rows, columns=list(_COLUMNS[name])
                )

    async def entry(self, line: dict[str, Any]) -> None:
        entry = Entry.from_row({**line, "at": _at(line["at"])})
        await self.add(
            "ledger",
            (
                line["seq"],
                entry.kind,
                entry.object_id,
                entry.version,
                entry.event,
                entry.actor,
                entry.at,
                entry.policy_version,
                entry.state,
                entry.prev_hash,
                entry.hash,
                line["hash_format"],
            ),
        )
        if self.object and (self.object[0].kind, self.object[0].object_id) != (
            entry.kind,
            entry.object_id,
        ):
            await self.project()
        self.object.append(entry)

    async def project(self) -> None:
        """Move the projections through one object's entries, as the write path did."""
        entries, self.object = self.object, []
        if entries[0].kind == "policy":
            for entry in entries:
                p = project_policy(entry)
                await self.add("policy_versions", (p.version, p.yaml, p.applied_at, p.applied_by))
            return
        if entries[0].kind == "correction":
            for entry in entries:
                row = project_correction(entry).row()
                await self.add("corrections", tuple(row[c] for c in _COLUMNS["corrections"]))
            return
        if entries[0].kind != "record":
            raise BackupError(f"the export holds ledger kind '{entries[0].kind}', unknown here")
        record: Record | None = None
        opened: dict[str, Membership] = {}
        for entry in entries:
            delta = project_record(record, entry)
            self.labels.update(label_changes(record, delta.record))
            record = delta.record
            for ep_id in delta.closed:
                was = opened.pop(ep_id)
                await self.add(
                    "edge_properties",
                    _membership(was, entry.at, entry.version),
                )
            opened.update((m.id, m) for m in delta.opened)
        assert record is not None
        for m in opened.values():
            await self.add("edge_properties", _membership(m, None, None))
        row = record_row(record)
        await self.add("records", tuple(row[c] for c in _COLUMNS["records"]))


def _membership(m: Membership, to: datetime | None, to_version: int | None) -> tuple[Any, ...]:
    return (
        m.id,
        m.record_id,
        m.lane,
        m.label,
        m.value,
        m.recorded_from,
        to,
        m.from_version,
        to_version,
    )


_COLUMNS: dict[str, tuple[str, ...]] = {
    "ledger": (
        "seq",
        "kind",
        "object_id",
        "version",
        "event",
        "actor",
        "at",
        "policy_version",
        "state",
        "prev_hash",
        "hash",
        "hash_format",
    ),
    "records": RECORD_COLUMNS,
    "edge_properties": (
        "id",
        "record_id",
        "lane",
        "label",
        "value",
        "recorded_from",
        "recorded_to",
        "from_version",
        "to_version",
    ),
    "policy_versions": ("version", "yaml", "applied_at", "applied_by"),
    "corrections": tuple(CorrectionRow.__dataclass_fields__),
    "audit_events": (
        "seq",
        "id",
        "kind",
        "record_id",
        "lane",
        "actor",
        "at",
        "payload",
        "version_before",
        "version_after",
        "object_kind",
        "object_id",
    ),
    "tokens": ("id", "agent", "token_hash", "created_at", "revoked_at"),
}

_EMPTY = """
SELECT (SELECT count(*) FROM ledger) + (SELECT count(*) FROM audit_events)
     + (SELECT count(*) FROM tokens) + (SELECT count(*) FROM checkpoints)
"""
_UNCOVERED = """
SELECT l.seq, l.hash FROM ledger l
WHERE NOT EXISTS (
  SELECT 1 FROM checkpoints c, unnest(string_to_array(c.covers, ',')) AS run
  WHERE c.covers <> '' AND l.seq BETWEEN split_part(run, '-', 1)::bigint
                                     AND split_part(run, '-', 2)::bigint)
ORDER BY l.seq
"""


async def import_(
    url: str, path: Path, signer: Signer | None, progress: Progress | None = None
) -> Summary:
    """Fill the empty database at `url` from the export in `path`, all or nothing."""
    conn = await connect(url)
    summary = Summary()
    try:
        if await conn.fetchval(_EMPTY):
            raise BackupError(
                "the database is not empty; import fills a new database only "
                "(create one, point DATABASE_URL or --data-dir at it, and import again)"
            )
        async with conn.transaction():
            summary = await _read(conn, path, progress)
            boundary = await conn.fetchval("SELECT pg_current_xact_id()::text::bigint + 1")
            uncovered = [(r[0], r[1]) for r in await conn.fetch(_UNCOVERED)]
            now = await conn.fetchval("SELECT clock_timestamp()")
            made = await checkpoints.append(conn, uncovered, boundary, now, signer)
            summary.checkpoint = made.seq
        if signer is not None:
            signer.remember(made.seq, made.hash)
    finally:
        await conn.close()
    return summary


async def _read(conn: Conn, path: Path, progress: Progress | None) -> Summary:
    importer = _Importer(conn)
    summary = Summary()
    lines = _lines(path)
    header = next(lines, None)
    if header is None or header.get("format") != FORMAT:
        raise BackupError(f"{path} is not an edgeloom export (no edgeloom-export header)")
    if header.get("version") != VERSION:
        raise BackupError(
            f"{path} is export format version {header.get('version')}; this edgeloom "
            f"reads version {VERSION}"
        )
    total = sum(header.get("counts", {}).values())
    end: dict[str, Any] | None = None
    for done, line in enumerate(lines, start=1):
        kind = line["t"]
        if kind == "end":
            end = line
            break
        summary.counts[kind] = summary.counts.get(kind, 0) + 1
        await _take(importer, kind, line)
        if progress is not None and done % _BATCH == 0:
            progress(done, total)
    expected = {k: v for k, v in (end or {}).get("counts", {}).items() if v}
    if end is None or expected != summary.counts:
        raise BackupError(
            f"{path} ends before its closing line: the export is incomplete, "
            "so nothing was imported"
        )
    if importer.object:
        await importer.project()
    await importer.flush()
    await _finish(conn, importer)
    if progress is not None:
        progress(total, total)
    return summary


async def _take(importer: _Importer, kind: str, line: dict[str, Any]) -> None:
    if kind == "entry":
        await importer.entry(line)
    elif kind == "key":
        importer.keys.append((line["id"], line["idempotency_key"]))
    elif kind == "event":
        row = {**line, "at": _at(line["at"])}
        await importer.add("audit_events", tuple(row[c] for c in _COLUMNS["audit_events"]))
    elif kind == "checkpoint":
        # Few rows, and xid8 has no binary copy format in the driver: plain inserts.
        await importer.conn.execute(
            "INSERT INTO checkpoints (seq, below_txid, entries, covers, at, prev_hash, hash, "
            "signature, key_id, signed_format) "
            "VALUES ($1, $2::text::xid8, $3, $4, $5, $6, $7, $8, $9, $10)",
            line["seq"],
            str(line["below_txid"]),
            line["entries"],
            line["covers"],
            _at(line["at"]),
            line["prev_hash"],
            line["hash"],
            line["signature"],
            line["key_id"],
            # Exports made before every field was signed name no format: they hold only 1.
            line.get("signed_format", 1),
        )
    elif kind == "token":
        row = {
            **line,
            "created_at": _at(line["created_at"]),
            "revoked_at": _at(line["revoked_at"]) if line["revoked_at"] else None,
        }
        await importer.add("tokens", tuple(row[c] for c in _COLUMNS["tokens"]))
    else:
        raise BackupError(f"unknown export line type '{kind}'")


async def _finish(conn: Conn, importer: _Importer) -> None:
    """What follows the copied rows: keys, the policy head, the sequences."""
    if importer.keys:
        await conn.execute(
            "UPDATE records r SET idempotency_key = k.key "
            "FROM unnest($1::text[], $2::text[]) AS k(id, key) WHERE r.id = k.id",
            [i for i, _ in importer.keys],
            [k for _, k in importer.keys],
        )
    await conn.execute(
        "UPDATE policy_head SET version = (SELECT coalesce(max(version), 0) FROM policy_versions)"
    )
    counted = [(lane, label, n) for (lane, label), n in importer.labels.items() if n]
    if counted:
        await conn.copy_records_to_table(
            "label_counts", records=counted, columns=["lane", "label", "records"]
        )
    for table in ("ledger", "audit_events"):
        await conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'seq'), "
            f"greatest((SELECT max(seq) FROM {table}), 1))"
        )
