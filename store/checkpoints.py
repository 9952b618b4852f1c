"""Checkpoints: anchors over the whole ledger, taken off the write path.

Checkpoint n covers every entry whose transaction id is below its `below_txid`,
which is the oldest transaction still running when it was taken: every entry below
it has committed (or never will), so no later write can add to what it covers.
Its hash chains the previous checkpoint's hash with the hashes of the entries it
adds, in feed order:

    sha256( (prev_hash or "") + "\\n" + entry_hash_1 + "\\n" + ... + entry_hash_k + "\\n" )

so deleting or rewriting any covered entry (a record's whole history, the tail of
one, a policy version) changes what `verify` recomputes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from store.pool import Conn
from store.signing import Signer, message

# Any fixed number: checkpoints from several gateway processes queue on it.
_CHECKPOINT_LOCK = 7_113_004

_LAST = "SELECT seq, below_txid::text::bigint, hash FROM checkpoints ORDER BY seq DESC LIMIT 1"
_HORIZON = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint, clock_timestamp()"
_COVERED = """
SELECT hash FROM ledger
WHERE txid >= $1::text::xid8 AND txid < $2::text::xid8
ORDER BY seq
"""
_INSERT = """
INSERT INTO checkpoints (seq, below_txid, entries, at, prev_hash, hash, signature, key_id)
VALUES ($1, $2::text::xid8, $3, $4, $5, $6, $7, $8)
"""


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    below_txid: int
    entries: int
    at: datetime
    prev_hash: str | None
    hash: str

    def payload(self) -> bytes:
        return message(self.seq, self.below_txid, self.entries, self.prev_hash, self.hash)


def chain(prev_hash: str | None, entry_hashes: Iterable[str]) -> str:
    digest = hashlib.sha256((prev_hash or "").encode() + b"\n")
    for entry in entry_hashes:
        digest.update(entry.encode() + b"\n")
    return digest.hexdigest()


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
        hashes = [r[0] for r in await conn.fetch(_COVERED, str(start), str(below))]
        if not hashes:
            return None
        prev = None if last is None else last[2]
        made = Checkpoint(
            seq=1 if last is None else last[0] + 1,
            below_txid=below,
            entries=len(hashes),
            at=at,
            prev_hash=prev,
            hash=chain(prev, hashes),
        )
        signature = key_id = None
        if signer is not None:
            signature = signer.sign(made.payload())
            key_id = signer.key_id
        await conn.execute(
            _INSERT,
            made.seq,
            str(made.below_txid),
            made.entries,
            made.at,
            made.prev_hash,
            made.hash,
            signature,
            key_id,
        )
    if signer is not None:
        signer.remember(made.seq, made.hash)
    return made
