"""Checkpoints: anchors over the whole ledger, taken off the write path.

Checkpoint n covers the entries settled since checkpoint n-1: those whose transaction
id lies between n-1's `below_txid` and its own, the oldest transaction still running
when it was taken, so every one of them has committed and no later write can add to
them. It names their ledger positions in `covers` (ranges of seq, "a-b,c-d"), which
survive an export and import where transaction ids do not, and its hash chains the
previous checkpoint's hash with theirs, in ledger order:

    sha256( (prev_hash or "") + "\\n" + entry_hash_1 + "\\n" + ... + entry_hash_k + "\\n" )

so deleting or rewriting any covered entry (a record's whole history, the tail of
one, a policy version) changes what `verify` recomputes. Signed with a key kept
outside the database (`store.signing`), not even the database owner can recompute it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from store.pool import Conn
from store.signing import Signer, message

# Any fixed number: checkpoints from several gateway processes queue on it.
_CHECKPOINT_LOCK = 7_113_004

_LAST = "SELECT seq, below_txid::text::bigint, hash FROM checkpoints ORDER BY seq DESC LIMIT 1"
_HORIZON = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint, clock_timestamp()"
_SETTLED = """
SELECT seq, hash FROM ledger
WHERE txid >= $1::text::xid8 AND txid < $2::text::xid8
ORDER BY seq
"""
_INSERT = """
INSERT INTO checkpoints (seq, below_txid, entries, covers, at, prev_hash, hash, signature, key_id)
VALUES ($1, $2::text::xid8, $3, $4, $5, $6, $7, $8, $9)
"""


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    below_txid: int
    entries: int
    covers: str
    at: datetime
    prev_hash: str | None
    hash: str

    def payload(self) -> bytes:
        return message(self.seq, self.covers, self.entries, self.prev_hash, self.hash)


def chain(prev_hash: str | None, entry_hashes: Iterable[str]) -> str:
    digest = hashlib.sha256((prev_hash or "").encode() + b"\n")
    for entry in entry_hashes:
        digest.update(entry.encode() + b"\n")
    return digest.hexdigest()


def ranges(positions: Sequence[int]) -> str:
    """Sorted positions as maximal runs: [1, 2, 3, 7] -> "1-3,7-7"."""
    runs: list[list[int]] = []
    for seq in positions:
        if runs and seq == runs[-1][1] + 1:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    return ",".join(f"{a}-{b}" for a, b in runs)


def parse_ranges(covers: str) -> list[tuple[int, int]]:
    if not covers:
        return []
    return [(int(a), int(b)) for a, b in (run.split("-") for run in covers.split(","))]


async def covered_hashes(conn: Conn, covers: str) -> list[str]:
    """The hashes of the entries at the positions `covers` names, in ledger order."""
    runs = parse_ranges(covers)
    if not runs:
        return []
    rows = await conn.fetch(
        "SELECT l.hash FROM ledger l JOIN unnest($1::bigint[], $2::bigint[]) AS r(a, b) "
        "ON l.seq BETWEEN r.a AND r.b ORDER BY l.seq",
        [a for a, _ in runs],
        [b for _, b in runs],
    )
    return [r[0] for r in rows]


async def append(
    conn: Conn,
    entries: Sequence[tuple[int, str]],
    below_txid: int,
    at: datetime,
    signer: Signer | None,
) -> Checkpoint:
    """Append the next checkpoint over `entries` ((seq, hash) in ledger order)."""
    last = await conn.fetchrow(_LAST)
    prev = None if last is None else last[2]
    made = Checkpoint(
        seq=1 if last is None else last[0] + 1,
        below_txid=below_txid,
        entries=len(entries),
        covers=ranges([seq for seq, _ in entries]),
        at=at,
        prev_hash=prev,
        hash=chain(prev, (h for _, h in entries)),
    )
    signature = key_id = None
    if signer is not None:
        signature, key_id = signer.sign(made.payload()), signer.key_id
    await conn.execute(
        _INSERT,
        made.seq,
        str(made.below_txid),
        made.entries,
        made.covers,
        made.at,
        made.prev_hash,
        made.hash,
        signature,
        key_id,
    )
    return made


async def take(conn: Conn, signer: Signer | None = None) -> Checkpoint | None:
    """Append a checkpoint over every entry settled since the last one (None: nothing new),
    signed with `signer` when one is given."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _CHECKPOINT_LOCK)
        last = await conn.fetchrow(_LAST)
        horizon = await conn.fetchrow(_HORIZON)
        assert horizon is not None
        below, at = horizon
        start = 0 if last is None else last[1]
        if below <= start:
            return None
        settled = [(r[0], r[1]) for r in await conn.fetch(_SETTLED, str(start), str(below))]
        if not settled:
            return None
        made = await append(conn, settled, below, at, signer)
    if signer is not None:
        signer.remember(made.seq, made.hash)
    return made
