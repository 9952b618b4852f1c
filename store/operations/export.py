"""Export: the whole memory written to a file (`store.operations.backup` gives its format),
read from one snapshot (REPEATABLE READ, READ ONLY, DEFERRABLE) while writers run."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from store.operations.backup import BATCH, FORMAT, VERSION, Progress, Summary, sealed_bytes
from store.operations.signing import Signer
from store.pool import connect

_SOURCES: dict[str, tuple[str, str]] = {
    "entry": (
        "SELECT count(*) FROM ledger",
        "SELECT seq, kind, object_id, version, event, actor, at, policy_version, state, "
        "prev_hash, hash, hash_format, state_sha256, erased_by FROM ledger "
        "ORDER BY kind, object_id, version",
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
        "SELECT id, agent, token_hash, created_at, revoked_at, expires_at, rotated_to "
        "FROM tokens ORDER BY id",
    ),
}


def _dumps(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value) + b"\n"


class _Digesting:
    """Writes lines and hashes them, for the closing line's digest and signature."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.sha = hashlib.sha256()

    def write(self, line: bytes) -> None:
        self.sha.update(line)
        self.out.write(line)

    def seal(self, signer: Signer | None) -> dict[str, str]:
        digest = self.sha.hexdigest()
        if signer is None:
            return {"sha256": digest}
        return {
            "sha256": digest,
            "signature": signer.sign(sealed_bytes(digest)),
            "key_id": signer.key_id,
        }


async def export(
    url: str, path: Path, progress: Progress | None = None, signer: Signer | None = None
) -> Summary:
    """Write the memory at `url` to `path` (replaced only once the file is complete);
    with the checkpoint key, sign what the file holds."""
    conn = await connect(url)
    tmp = path.with_name(path.name + ".partial")
    summary = Summary()
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True, deferrable=True):
            totals = {t: int(await conn.fetchval(q)) for t, (q, _) in _SOURCES.items()}
            total, done = sum(totals.values()), 0
            revision = await conn.fetchval("SELECT version_num FROM alembic_version")
            with gzip.open(tmp, "wb", compresslevel=6) as packed:
                out = _Digesting(packed)
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
                    async for row in conn.cursor(query, prefetch=BATCH):
                        out.write(_dumps({"t": kind, **dict(row)}))
                        n += 1
                        done += 1
                        if progress is not None and done % BATCH == 0:
                            progress(done, total)
                    summary.counts[kind] = n
                packed.write(_dumps({"t": "end", "counts": summary.counts, **out.seal(signer)}))
        os.replace(tmp, path)
    finally:
        await conn.close()
        tmp.unlink(missing_ok=True)
    if progress is not None:
        progress(total, total)
    return summary
