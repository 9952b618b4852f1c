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
outside the database (`store.operations.signing`), over every field (`signed_format` 2), not even
the database owner can recompute it, nor move the range the next one starts from.

The checks a checkpoint must pass (`problems`, `signature_problems`, `overlaps`,
`horizon_problem`) are plain functions of the rows, so that `verify` and whatever else
holds checkpoints (an export being imported) apply the same ones.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from store.errors import StoreError
from store.operations.signing import Signer, lines, load, load_or_create, memory_of, message
from store.pool import Conn

log = logging.getLogger("edgeloom.checkpoints")

# Any fixed number: checkpoints from several gateway processes queue on it.
_CHECKPOINT_LOCK = 7_113_004

# The bytes a new checkpoint's signature covers: 2, every field; 1, only seq, covers,
# entries, prev_hash and hash (checkpoints taken before every field was signed).
SIGNED_FORMAT = 2

COLUMNS = (
    "seq, below_txid::text::bigint AS below_txid, entries, covers, at, prev_hash, hash, "
    "key_id, signature, signed_format"
)
ALL = f"SELECT {COLUMNS} FROM checkpoints ORDER BY seq"
_LAST = f"SELECT {COLUMNS} FROM checkpoints ORDER BY seq DESC LIMIT 1"
_HORIZON = """
SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint, clock_timestamp()
FROM pg_current_snapshot() AS s
"""
_SETTLED = """
SELECT seq, hash FROM ledger
WHERE txid >= $1::text::xid8 AND txid < $2::text::xid8
ORDER BY seq
"""
_INSERT = """
INSERT INTO checkpoints (seq, below_txid, entries, covers, at, prev_hash, hash, signature, key_id,
                         signed_format)
VALUES ($1, $2::text::xid8, $3, $4, $5, $6, $7, $8, $9, $10)
"""
_NEWEST_COVERS = "SELECT covers FROM checkpoints WHERE entries > 0 ORDER BY seq DESC LIMIT 1"
_OLD_BUT_NEW = "SELECT seq FROM ledger WHERE seq > $1 AND txid < $2::text::xid8 ORDER BY seq"
_COVERS_BEFORE = "SELECT seq, covers FROM checkpoints WHERE seq < $1 ORDER BY seq DESC LIMIT 500"
_WAITING = "SELECT count(*) FROM ledger WHERE txid >= $1::text::xid8"
_NEWEST_SIGNED = (
    "SELECT seq, key_id FROM checkpoints WHERE signature IS NOT NULL ORDER BY seq DESC LIMIT 1"
)


class CheckpointError(StoreError):
    """A checkpoint that cannot be taken; the message says why and what to do."""


class CheckpointKeyError(CheckpointError):
    """A checkpoint key that is not the one this memory's newest checkpoints were signed with."""


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    below_txid: int
    entries: int
    covers: str
    at: datetime
    prev_hash: str | None
    hash: str
    key_id: str | None = None
    signature: str | None = None
    signed_format: int = SIGNED_FORMAT

    @classmethod
    def from_row(cls, row: Any) -> Checkpoint:
        """From a row of `COLUMNS` (or an export's checkpoint line, `at` parsed)."""
        return cls(
            seq=int(row["seq"]),
            below_txid=int(row["below_txid"]),
            entries=int(row["entries"]),
            covers=row["covers"],
            at=row["at"],
            prev_hash=row["prev_hash"],
            hash=row["hash"],
            key_id=row["key_id"],
            signature=row["signature"],
            signed_format=int(row.get("signed_format", 1)),
        )

    def payload(self) -> bytes:
        """The bytes its signature covers."""
        if self.signed_format == 1:
            return message(self.seq, self.covers, self.entries, self.prev_hash, self.hash)
        return lines(
            f"edgeloom-checkpoint/{self.signed_format}",
            self.seq,
            self.below_txid,
            self.entries,
            self.covers,
            self.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            self.prev_hash or "",
            self.hash,
            self.key_id or "",
        )


@dataclass(frozen=True)
class Taken:
    """What one attempt to checkpoint did and found."""

    made: Checkpoint | None
    # Positions of entries older than the newest checkpoint's range that no checkpoint
    # covers: each was inserted into history after its range was anchored (or the range
    # was moved past it). They are never anchored, so `verify` keeps reporting them.
    strays: tuple[int, ...] = ()
    # When nothing was anchored: committed entries not yet settled, held back by the
    # oldest transaction still running.
    waiting: int = 0
    oldest_running: int = 0

    def warnings(self) -> list[str]:
        """The conditions an operator must hear of, as sentences."""
        said = []
        if self.strays:
            shown = ", ".join(str(seq) for seq in self.strays[:10])
            more = "" if len(self.strays) <= 10 else f" and {len(self.strays) - 10} more"
            said.append(
                f"{len(self.strays)} ledger entries (positions {shown}{more}) are older than "
                "the newest checkpoint's range, yet no checkpoint covers them: they were "
                "inserted into history after it was anchored, or that range was altered; "
                "they are not anchored, run edgeloom verify"
            )
        if self.made is None and self.waiting:
            said.append(
                f"nothing anchored: {self.waiting} committed ledger entries wait for "
                f"transaction {self.oldest_running}, the oldest still running, to end"
            )
        return said


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


def problems(made: Checkpoint, prev: Checkpoint | None, covered: Sequence[str]) -> list[str]:
    """What is wrong with checkpoint `made`, the one after `prev` (None: the first), whose
    positions hold entries of the hashes `covered` (in ledger order): its number, its link
    to `prev`, and its hash recomputed from those entries."""
    found = []
    expected = 1 if prev is None else prev.seq + 1
    if made.seq != expected:
        found.append(
            f"checkpoint {made.seq}: checkpoint {expected} is missing before it; "
            "checkpoints were removed"
        )
    if made.prev_hash != (None if prev is None else prev.hash):
        found.append(f"checkpoint {made.seq}: prev_hash breaks the chain")
    if len(covered) != made.entries or chain(made.prev_hash, covered) != made.hash:
        found.append(
            f"checkpoint {made.seq}: covers {made.entries} entries, but the ledger "
            f"holds {len(covered)} at those positions that hash differently: history before it "
            "was erased or rewritten"
        )
    return found


def signature_problems(made: Sequence[Checkpoint], signer: Signer) -> list[str]:
    """What is wrong with the signatures of `made` (every checkpoint, in order), checked
    with `signer`'s key. One it signed must match every field. One it did not sign (signed
    by a key it replaced, or by the memory an import came from, or not at all) is vouched
    for by a later one it did sign, whose hash chains it; after the last of those, it is a
    problem."""
    found = []
    mine = [c.seq for c in made if c.key_id == signer.key_id and c.signature is not None]
    vouched = mine[-1] if mine else 0
    for checkpoint in made:
        seq = checkpoint.seq
        if checkpoint.key_id == signer.key_id and checkpoint.signature is not None:
            if not signer.valid(checkpoint.payload(), checkpoint.signature):
                found.append(f"checkpoint {seq}: the signature does not match; it was forged")
        elif seq > vouched and checkpoint.signature is None:
            found.append(f"checkpoint {seq}: not signed")
        elif seq > vouched:
            found.append(
                f"checkpoint {seq}: signed by key {checkpoint.key_id}, "
                f"not by this key ({signer.key_id})"
            )
    return found


def overlaps(made: Sequence[Checkpoint]) -> list[str]:
    """Positions two checkpoints both claim to cover (each entry is covered by one)."""
    runs = sorted((a, b, c.seq) for c in made for a, b in parse_ranges(c.covers))
    found = []
    end, owner = 0, 0
    for a, b, seq in runs:
        if owner and a <= end:
            first, second = sorted((owner, seq))
            found.append(
                f"checkpoints {first} and {second} both cover ledger positions {a}-{min(b, end)}"
            )
        if b > end:
            end, owner = b, seq
    return found


def covered_set(made: Sequence[Checkpoint]) -> str:
    """Every position `made` covers, as the text of a PostgreSQL int8multirange."""
    runs = sorted(run for c in made for run in parse_ranges(c.covers))
    merged: list[list[int]] = []
    for a, b in runs:
        if merged and a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return "{" + ",".join(f"[{a},{b}]" for a, b in merged) + "}"


def horizon_problem(newest: Checkpoint, next_txid: int) -> str | None:
    """A newest checkpoint whose range reaches past every transaction begun so far (the
    next transaction id is `next_txid`): moved forward, it would leave every later entry
    to no checkpoint."""
    if newest.below_txid <= next_txid:
        return None
    return (
        f"checkpoint {newest.seq} claims to cover the transactions below {newest.below_txid}, "
        f"but none past {next_txid - 1} has begun: its range was altered"
    )


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
    prev = None if last is None else last["hash"]
    made = Checkpoint(
        seq=1 if last is None else last["seq"] + 1,
        below_txid=below_txid,
        entries=len(entries),
        covers=ranges([seq for seq, _ in entries]),
        at=at,
        prev_hash=prev,
        hash=chain(prev, (h for _, h in entries)),
        key_id=None if signer is None else signer.key_id,
    )
    signature = None if signer is None else signer.sign(made.payload())
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
        made.key_id,
        made.signed_format,
    )
    return replace(made, signature=signature)


async def take(conn: Conn, signer: Signer | None = None, *, even_if_empty: bool = False) -> Taken:
    """Append a checkpoint over every entry settled since the last one (none when nothing
    is new, unless `even_if_empty`), signed with `signer` when one is given.

    Refused (CheckpointError) when the newest checkpoint was altered so that nothing could
    follow it: its range moved past every transaction, or, signed by `signer`'s key, it
    no longer matches its signature."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _CHECKPOINT_LOCK)
        row = await conn.fetchrow(_LAST)
        last = None if row is None else Checkpoint.from_row(row)
        horizon = await conn.fetchrow(_HORIZON)
        assert horizon is not None
        below, next_txid, at = horizon
        start = 0
        strays: tuple[int, ...] = ()
        if last is not None:
            problem = horizon_problem(last, next_txid)
            if problem is not None:
                raise CheckpointError(
                    f"{problem}; no checkpoint can follow it: run edgeloom verify"
                )
            if (
                signer is not None
                and last.key_id == signer.key_id
                and not signer.valid(last.payload(), last.signature or "")
            ):
                raise CheckpointError(
                    f"checkpoint {last.seq} no longer matches its signature: it was altered "
                    "after it was signed, and no checkpoint can follow it; run edgeloom verify"
                )
            start = last.below_txid
            strays = tuple(await _strays(conn, last.seq, start))
        settled = (
            []
            if below <= start
            else [(r[0], r[1]) for r in await conn.fetch(_SETTLED, str(start), str(below))]
        )
        made = None
        waiting = 0
        if settled or even_if_empty:
            made = await append(conn, settled, max(below, start), at, signer)
        else:
            waiting = int(await conn.fetchval(_WAITING, str(max(below, start))))
    if made is not None and signer is not None:
        signer.remember(made.seq, made.hash)
    return Taken(made, strays, waiting, below)


async def _strays(conn: Conn, newest: int, start: int) -> list[int]:
    """Entries older than the newest checkpoint's range (transaction below `start`) that
    no checkpoint covers, among those past the newest position it covers (one inserted
    into a gap of earlier positions is found by `verify`, which reads every position)."""
    covers = await conn.fetchval(_NEWEST_COVERS)
    floor = parse_ranges(covers)[-1][1] if covers else 0
    # An entry committed late can lie past that position and still be covered, by an
    # earlier checkpoint (its transaction began before a later one's), so each is looked
    # for in the checkpoints, newest first; normally there are none or few.
    left = {r[0] for r in await conn.fetch(_OLD_BUT_NEW, floor, str(start))}
    before = newest + 1
    while left:
        rows = await conn.fetch(_COVERS_BEFORE, before)
        if not rows:
            break
        for seq, covers in rows:
            for a, b in parse_ranges(covers):
                left = {p for p in left if not a <= p <= b}
            before = seq
    return sorted(left)


async def open_key(conn: Conn, path: Path, url: str, new_key: bool = False) -> Signer:
    """The key in `path` that signs the next checkpoints of the memory at `url`, made when
    none exists and nothing here was signed yet.

    Refused (CheckpointKeyError) when the newest signed checkpoint here was signed by
    another key, or the file is missing while one exists: the key was lost or swapped,
    and the new one could check none of the earlier signatures. With `new_key`, the key
    in `path` (made when missing) takes over: the replacement is logged and a checkpoint
    signed by it is appended at once, vouching for the chain as it stands."""
    memory = memory_of(url)
    found = load(path, memory)
    newest = await conn.fetchrow(_NEWEST_SIGNED)
    if newest is None or (found is not None and found.key_id == newest["key_id"]):
        return found or load_or_create(path, memory)
    seq, key_id = newest
    if not new_key:
        what = (
            f"the checkpoint key {path} is missing"
            if found is None
            else f"the checkpoint key {path} (key id {found.key_id}) did not sign them"
        )
        raise CheckpointKeyError(
            f"checkpoints up to {seq} in {memory} were signed by key {key_id}, but {what}: "
            "restore that key file (or point --checkpoint-key / EDGELOOM_CHECKPOINT_KEY at "
            "it), or pass --new-checkpoint-key to sign from now on with the key in "
            f"{path} (made if missing), which then vouches for the ledger as it stands "
            "(run edgeloom verify first)"
        )
    signer = found or load_or_create(path, memory)
    taken = await take(conn, signer, even_if_empty=True)
    assert taken.made is not None
    log.warning(
        "the checkpoint key %s (key id %s) replaces key %s, which signed checkpoints up to %s "
        "in %s; checkpoint %s, signed by the new key, vouches for the ledger as it stands",
        path,
        signer.key_id,
        key_id,
        seq,
        memory,
        taken.made.seq,
    )
    return signer
