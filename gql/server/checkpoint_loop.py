"""The gateway's periodic checkpoint, off the write path."""

from __future__ import annotations

import asyncio
import logging

from store.operations import checkpoints
from store.operations.signing import Signer
from store.pool import Pool, unlimited

log = logging.getLogger("edgeloom")


async def anchor_every(pool: Pool, every: float, signer: Signer | None) -> None:
    """Anchor the ledger at an interval, off the write path; a failure waits for the next."""
    if every <= 0:
        return
    while True:
        await asyncio.sleep(every)
        try:
            async with pool.acquire() as conn, unlimited(conn):
                taken = await checkpoints.take(conn, signer)
            if taken.made is not None:
                log.info("checkpoint %s anchors %s new entries", taken.made.seq, taken.made.entries)
            for warning in taken.warnings():
                log.warning("checkpoint: %s", warning)
        except checkpoints.CheckpointError as exc:
            log.error("no checkpoint can be taken: %s", exc.message)
        except Exception:
            log.exception("checkpoint failed; the next interval tries again")
