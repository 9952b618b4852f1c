"""Checking the ledger: chains, checkpoints and events hold, and the projections equal a
rebuild from the ledger made with the same projection rules the write path uses.

Everything is read in one REPEATABLE READ, READ ONLY, DEFERRABLE transaction: one
snapshot, so writers running meanwhile never look like tampering.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncpg

import store.kinds  # noqa: F401  (registers the built-in kinds)
from store.ledger import registry
from store.ledger.entry import Entry
from store.ledger.erasure import Erasures
from store.ledger.event_check import event_problems
from store.ledger.report import Report
from store.operations import checkpoints
from store.operations.checkpoints import Checkpoint, covered_hashes
from store.operations.signing import Signer
from store.pool import Conn, connect

if TYPE_CHECKING:
    from store.ledger.registry import Replay

_LEDGER = """
SELECT kind, object_id, version, event, actor, at, policy_version, state, prev_hash, hash,
       hash_format, state_sha256, erased_by
FROM ledger ORDER BY kind, object_id, version
"""
_NEXT_TXID = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
_UNCOVERED = """
SELECT seq FROM ledger WHERE txid < $1::text::xid8 AND NOT seq <@ $2::text::int8multirange
ORDER BY seq
"""


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
            replays = await _replay(conn, report)
            for replay in replays.values():
                await replay.compare(conn, report)
            await _check_events(conn, report)
            await _check_checkpoints(conn, report, signer, head)
    finally:
        await conn.close()
    return report


async def _replay(conn: Conn, report: Report) -> dict[str, Replay]:
    """Every object's chain, checked and replayed by its kind's rule."""
    replays = {kind.name: kind.replay(keep=True) for kind in registry.kinds()}
    erasures = Erasures()
    chain_of: list[asyncpg.Record] = []
    async for row in conn.cursor(_LEDGER, prefetch=2000):
        report.entries += 1
        if chain_of and (chain_of[0]["kind"], chain_of[0]["object_id"]) != (
            row["kind"],
            row["object_id"],
        ):
            _replay_object(chain_of, replays, report, erasures)
            chain_of = []
        chain_of.append(row)
    if chain_of:
        _replay_object(chain_of, replays, report, erasures)
    report.problems.extend(erasures.problems())
    report.erased.extend(erasures.erased())
    return replays


def _replay_object(
    rows: list[asyncpg.Record], replays: dict[str, Replay], report: Report, erasures: Erasures
) -> None:
    """Check one object's chain and move the rebuilt projections through its entries."""
    kind, object_id = rows[0]["kind"], rows[0]["object_id"]
    name = registry.describe(kind, object_id)
    prev_hash: str | None = None
    entries: list[Entry] = []
    for number, row in enumerate(rows, start=1):
        entry = Entry.from_row(row)
        if entry.version != number:
            report.problems.append(f"{name}: version {entry.version} where {number} was expected")
        if entry.prev_hash != prev_hash:
            report.problems.append(f"{name} v{entry.version}: prev_hash breaks the chain")
        problem = erasures.check(entry, row["hash_format"], row["erased_by"])
        if problem is not None:
            report.problems.append(problem)
        prev_hash = entry.hash
        entries.append(entry)
    replay = replays.get(kind)
    if replay is None:
        report.problems.append(f"{name}: no projection rule for ledger kind '{kind}'")
        return
    for _ in replay.object(entries):
        pass


async def _check_events(conn: Conn, report: Report) -> None:
    """Every entry has the events that report it, no event lacks its entry, and every
    event says what its entry implies."""
    report.problems.extend(str(problem) for problem in await event_problems(conn))


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
