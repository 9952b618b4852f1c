"""The gateway's expiry sweep: the tombstones of expired records, off the write path."""

from __future__ import annotations

import asyncio
import logging

from store.kinds.record.expiry import sweep
from store.ledger.executor import Executor
from store.pool import Pool

log = logging.getLogger("edgeloom")


async def expire_every(pool: Pool, executor: Executor, every: float) -> None:
    """Write the tombstones of the records expired since, at an interval (reads treat them
    as retired from their instant already); a failure waits for the next."""
    if every <= 0:
        return
    while True:
        await asyncio.sleep(every)
        try:
            retired = await sweep(pool, executor)
            if retired:
                log.info("expiry retired %s records", len(retired))
        except Exception:
            log.exception("expiry sweep failed; the next interval tries again")
