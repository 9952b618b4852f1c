"""Import: an empty database filled from an export file (`store.operations.backup` gives
its format) in one transaction, all or nothing.

It copies the ledger, rebuilds every projection with the write path's projection rules,
and anchors the imported entries in a checkpoint of the new cluster, so ids, versions,
hashes and every asOf answer are the same and `verify` passes. Before it commits, it
checks what `verify` would of the file (the chains, the events, the checkpoints, their
signatures) and its signature, and refuses at the first line that does not hold: the new
checkpoint must not vouch for what nobody checked.
"""

from __future__ import annotations

import hashlib
import re
from array import array
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

import store.kinds  # noqa: F401  (registers the built-in kinds)
from store.ledger import registry
from store.ledger.entry import Entry
from store.ledger.erasure import Erasures
from store.ledger.event_check import event_problems
from store.ledger.implied import Problem
from store.operations import checkpoints
from store.operations.backup import (
    BATCH,
    FORMAT,
    VERSION,
    BackupError,
    Line,
    Progress,
    Summary,
    read_lines,
    sealed_bytes,
)
from store.operations.checkpoints import Checkpoint
from store.operations.signing import Signer
from store.pool import Conn, connect


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)


class _Importer:
    """Buffers rows per table and copies them in batches; replays entries per object."""

    def __init__(self, conn: Conn, path: Path) -> None:
        self.conn = conn
        self.path = path
        self.buffers: dict[str, list[tuple[Any, ...]]] = {}
        self.object: list[Entry] = []
        self.keys: list[tuple[str, str]] = []
        self.replays = {kind.name: kind.replay(keep=False) for kind in registry.kinds()}
        self.last: Entry | None = None  # the entry before, to check each chain as it is read
        self.erasures = Erasures()
        # Where each entry, event and checkpoint is in the file (by its seq), to name
        # the line of what the checks after reading find.
        self.entry_seqs, self.entry_lines = array("q"), array("q")
        self.event_seqs, self.event_lines = array("q"), array("q")
        self.checkpoint_lines: dict[int, int] = {}

    def refuse(self, number: int, what: str) -> BackupError:
        return BackupError(f"{self.path} line {number}: {what}; nothing was imported")

    async def add(self, table: str, row: tuple[Any, ...]) -> None:
        buffer = self.buffers.setdefault(table, [])
        buffer.append(row)
        if len(buffer) >= BATCH:
            await self.flush(table)

    async def flush(self, table: str | None = None) -> None:
        for name in [table] if table else list(self.buffers):
            rows = self.buffers.pop(name, [])
            if rows:
                await self.conn.copy_records_to_table(
                    name, records=rows, columns=list(_columns(name))
                )

    async def entry(self, number: int, line: dict[str, Any]) -> None:
        entry = Entry.from_row({**line, "at": _at(line["at"])})
        self._check_chain(number, entry, line["hash_format"], line.get("erased_by"))
        self.last = entry
        self.entry_seqs.append(line["seq"])
        self.entry_lines.append(number)
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
                entry.state_sha256,
                line.get("erased_by"),
            ),
        )
        if self.object and (self.object[0].kind, self.object[0].object_id) != (
            entry.kind,
            entry.object_id,
        ):
            await self.project()
        self.object.append(entry)

    def _check_chain(
        self, number: int, entry: Entry, hash_format: int, erased_by: str | None
    ) -> None:
        """The entry continues its object's chain (or starts one, in the file's order)
        and its hash is the hash of its canonical bytes."""
        last, key = self.last, (entry.kind, entry.object_id)
        name = registry.describe(entry.kind, entry.object_id)
        if last is not None and (last.kind, last.object_id) == key:
            version, prev_hash = last.version + 1, last.hash
        else:
            if last is not None and key <= (last.kind, last.object_id):
                raise self.refuse(
                    number, f"{name} comes after {last.object_id}: entries are out of order"
                )
            version, prev_hash = 1, None
        if entry.version != version:
            raise self.refuse(
                number, f"{name}: version {entry.version} where {version} was expected"
            )
        if entry.prev_hash != prev_hash:
            raise self.refuse(number, f"{name} v{entry.version}: prev_hash breaks the chain")
        problem = self.erasures.check(entry, hash_format, erased_by)
        if problem is not None:
            raise self.refuse(number, problem)

    def event(self, number: int, seq: int) -> None:
        if self.event_seqs and seq <= self.event_seqs[-1]:
            raise self.refuse(number, f"event {seq} is out of feed order")
        self.event_seqs.append(seq)
        self.event_lines.append(number)

    def line_of(self, problem: Problem, entry_seq: int | None) -> int:
        """The line an event check's problem names: its event's, else its entry's."""
        event = problem.seq if problem.seq is not None else problem.event
        if event is not None:
            return self.event_lines[self.event_seqs.index(event)]
        if entry_seq is not None and entry_seq in self.entry_seqs:
            return self.entry_lines[self.entry_seqs.index(entry_seq)]
        return 0

    async def project(self) -> None:
        """Move the projections through one object's entries, as the write path did."""
        entries, self.object = self.object, []
        replay = self.replays.get(entries[0].kind)
        if replay is None:
            raise BackupError(f"the export holds ledger kind '{entries[0].kind}', unknown here")
        for table, row in replay.object(entries):
            await self.add(table, row)


def _columns(table: str) -> tuple[str, ...]:
    """The columns import copies into `table`: its own, or a kind's projection's."""
    if table in _COLUMNS:
        return _COLUMNS[table]
    return next(t.columns for k in registry.kinds() for t in k.tables if t.name == table)


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
        "state_sha256",
        "erased_by",
    ),
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
    "tokens": (
        "id",
        "agent",
        "token_hash",
        "created_at",
        "revoked_at",
        "expires_at",
        "rotated_to",
    ),
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
    url: str,
    path: Path,
    signer: Signer | None,
    progress: Progress | None = None,
    *,
    checker: Signer | None = None,
) -> Summary:
    """Fill the empty database at `url` from the export in `path`, all or nothing.

    Everything the file holds is checked before anything is committed: every entry's
    hash and chain, every event against its entry, every checkpoint against the entries
    it covers, and with `checker` (the key the file was exported with) the checkpoints'
    and the file's signatures. `signer` signs the new checkpoint."""
    conn = await connect(url)
    summary = Summary()
    try:
        if await conn.fetchval(_EMPTY):
            raise BackupError(
                "the database is not empty; import fills a new database only "
                "(create one, point DATABASE_URL or --data-dir at it, and import again)"
            )
        try:
            async with conn.transaction():
                summary = await _read(conn, path, progress, checker)
                boundary = await conn.fetchval("SELECT pg_current_xact_id()::text::bigint + 1")
                uncovered = [(r[0], r[1]) for r in await conn.fetch(_UNCOVERED)]
                now = await conn.fetchval("SELECT clock_timestamp()")
                made = await checkpoints.append(conn, uncovered, boundary, now, signer)
                summary.checkpoint = made.seq
        except asyncpg.IntegrityConstraintViolationError as exc:
            raise BackupError(
                f"{path} holds rows the database refuses ({exc}); nothing was imported"
            ) from exc
        if signer is not None:
            signer.remember(made.seq, made.hash)
        # Committed: the new rows' statistics now, not autovacuum's tens of seconds
        # later, so the first reads are not planned for tables believed empty.
        await conn.execute("ANALYZE")
    finally:
        await conn.close()
    return summary


async def _read(
    conn: Conn, path: Path, progress: Progress | None, checker: Signer | None
) -> Summary:
    importer = _Importer(conn, path)
    summary = Summary()
    lines = read_lines(path)
    first = next(lines, None)
    header = {} if first is None else first.value
    if header.get("format") != FORMAT:
        raise BackupError(f"{path} is not an edgeloom export (no edgeloom-export header)")
    if header.get("version") != VERSION:
        raise BackupError(
            f"{path} is export format version {header.get('version')}; this edgeloom "
            f"reads version {VERSION}"
        )
    assert first is not None
    digest = hashlib.sha256(first.raw)
    total = sum(header.get("counts", {}).values())
    end: Line | None = None
    for done, line in enumerate(lines, start=1):
        kind = line.value["t"]
        if kind == "end":
            end = line
            break
        digest.update(line.raw)
        summary.counts[kind] = summary.counts.get(kind, 0) + 1
        try:
            await _take(importer, line.number, kind, line.value)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise importer.refuse(line.number, f"a malformed '{kind}' line ({exc!r})") from exc
        if progress is not None and done % BATCH == 0:
            progress(done, total)
    counts = {} if end is None else end.value.get("counts", {})
    if end is None or {k: v for k, v in counts.items() if v} != summary.counts:
        raise BackupError(
            f"{path} ends before its closing line: the export is incomplete, "
            "so nothing was imported"
        )
    erasures = importer.erasures.problems()
    if erasures:
        raise BackupError(f"{path}: {erasures[0]}; nothing was imported")
    if importer.object:
        await importer.project()
    await importer.flush()
    await _finish(conn, importer)
    # In the order the file holds them: events, checkpoints, the closing line.
    await _check_events(importer)
    await _check_checkpoints(importer, checker)
    summary.unchecked = _check_seal(importer, end, digest.hexdigest(), checker)
    if progress is not None:
        progress(total, total)
    return summary


async def _check_events(importer: _Importer) -> None:
    """Every event is what its entry implies (the rule `verify` applies), refused at the
    first line that is not."""
    found = (await event_problems(importer.conn))[:50]
    if not found:
        return
    placed = []
    for problem in found:
        seq = await importer.conn.fetchval(
            "SELECT seq FROM ledger WHERE kind = $1 AND object_id = $2 AND version = $3",
            problem.kind,
            problem.object_id,
            problem.version,
        )
        placed.append((importer.line_of(problem, seq), str(problem)))
    number, text = min(placed)
    raise importer.refuse(number, text)


async def _check_checkpoints(importer: _Importer, checker: Signer | None) -> None:
    """The file's checkpoints as `verify` checks them: each recomputed from the entries it
    covers and following the one before, none overlapping another, and with `checker`
    every signature; refused at the line of the first that fails."""
    made = [Checkpoint.from_row(row) for row in await importer.conn.fetch(checkpoints.ALL)]
    found: list[str] = []
    prev: Checkpoint | None = None
    for checkpoint in made:
        hashes = await checkpoints.covered_hashes(importer.conn, checkpoint.covers)
        found.extend(checkpoints.problems(checkpoint, prev, hashes))
        prev = checkpoint
    found.extend(checkpoints.overlaps(made))
    if checker is not None:
        found.extend(checkpoints.signature_problems(made, checker))
    if found:
        placed = [(_checkpoint_line(importer, text), text) for text in found]
        number, text = min(placed)
        raise importer.refuse(number, text)


def _checkpoint_line(importer: _Importer, problem: str) -> int:
    """The line of the checkpoint a problem names first ("checkpoint 3: ...")."""
    named = re.search(r"\bcheckpoints? (\d+)", problem)
    lines = importer.checkpoint_lines
    if named is not None and int(named.group(1)) in lines:
        return lines[int(named.group(1))]
    return min(lines.values())


def _check_seal(importer: _Importer, end: Line, digest: str, checker: Signer | None) -> list[str]:
    """The closing line's digest of every line before it, and its signature by
    `checker`; what could not be checked, said."""
    sealed = end.value.get("sha256")
    if sealed is not None and sealed != digest:
        raise importer.refuse(
            end.number, "the SHA-256 of the lines before it differs from the one exported"
        )
    if checker is None:
        return [
            "no checkpoint key, so no signature was checked: the entries after the file's "
            "newest checkpoint, and its lines other than entries and events, were checked "
            "only against the file itself"
        ]
    if sealed is None or end.value.get("signature") is None:
        raise importer.refuse(
            end.number,
            "the export is not signed, so what follows its newest checkpoint cannot be "
            f"checked against the key {checker.path}; export it again with that key, or "
            "import it with --checkpoint-key naming a new key file to check it only "
            "against itself",
        )
    if end.value.get("key_id") != checker.key_id:
        raise importer.refuse(
            end.number,
            f"the export is signed by key {end.value.get('key_id')}, not by this key "
            f"({checker.key_id})",
        )
    if not checker.valid(sealed_bytes(digest), str(end.value["signature"])):
        raise importer.refuse(
            end.number, "the file's signature does not match what it holds; it was forged"
        )
    return []


async def _take(importer: _Importer, number: int, kind: str, line: dict[str, Any]) -> None:
    if kind == "entry":
        await importer.entry(number, line)
    elif kind == "key":
        importer.keys.append((line["id"], line["idempotency_key"]))
    elif kind == "event":
        row = {**line, "at": _at(line["at"])}
        importer.event(number, line["seq"])
        await importer.add("audit_events", tuple(row[c] for c in _COLUMNS["audit_events"]))
    elif kind == "checkpoint":
        importer.checkpoint_lines[line["seq"]] = number
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
            # Exports made before tokens could expire or rotate hold neither.
            "expires_at": _at(line["expires_at"]) if line.get("expires_at") else None,
            "rotated_to": line.get("rotated_to"),
        }
        await importer.add("tokens", tuple(row[c] for c in _COLUMNS["tokens"]))
    else:
        raise BackupError(f"unknown export line type '{kind}'")


async def _finish(conn: Conn, importer: _Importer) -> None:
    """What follows the copied rows: keys, what each kind sums up (the policy head, the
    label counts), the sequences."""
    if importer.keys:
        await conn.execute(
            "UPDATE records r SET idempotency_key = k.key "
            "FROM unnest($1::text[], $2::text[]) AS k(id, key) WHERE r.id = k.id",
            [i for i, _ in importer.keys],
            [k for _, k in importer.keys],
        )
    # What a kind sums up may read the copied rows (the text index reads the ledger).
    await importer.flush()
    for replay in importer.replays.values():
        await replay.finish(conn, importer.add)
    await importer.flush()
    for table in ("ledger", "audit_events"):
        await conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'seq'), "
            f"greatest((SELECT max(seq) FROM {table}), 1))"
        )
