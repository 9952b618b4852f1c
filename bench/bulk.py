"""Bulk loads for the benches: records written through the store's Ingest command from the
bench process, as many a command as one takes, a few commands in flight.

A load is not what a bench measures, so it skips what only an outside caller needs (HTTP,
GraphQL's coercion of every value, JSON both ways) and keeps the write path itself: the
guard, one ledger transaction a command with its hash chain, the projections and the audit
events, as `ingestMany` writes them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from bench.measure import Progress
from store.kinds.policy.in_force import PolicyCache
from store.kinds.record.commands import Ingest, NewRecord
from store.ledger.executor import Executor
from store.ledger.upkeep import ANALYZE_AFTER_ROWS
from store.limits import MAX_BATCH
from store.pool import create_pool

AGENT = "dev"
# The most one Ingest command takes.
BATCH = MAX_BATCH


@contextlib.asynccontextmanager
async def executor(
    url: str, workers: int, analyze_after: int = ANALYZE_AFTER_ROWS
) -> AsyncIterator[Executor]:
    """An executor of the bench's own on `url` (a policy must be in force, or be applied
    through it), with a connection for each worker and one to spare."""
    pool = await create_pool(url, workers + 1)
    try:
        yield Executor(pool, PolicyCache.empty(), analyze_after=analyze_after)
    finally:
        await pool.close()


async def ingest(
    executor: Executor,
    make: Callable[[int], list[NewRecord]],
    count: int,
    workers: int,
    label: str = "loading",
) -> list[str]:
    """Write `count` records, `make(n)` giving the next n in order, `workers` commands in
    flight; the new records' ids in the order `make` gave them."""
    ids: list[str] = []
    lock = asyncio.Lock()
    done = 0
    progress = Progress(count, label)

    async def worker() -> None:
        nonlocal done
        while True:
            async with lock:
                n = min(BATCH, count - len(ids))
                if n <= 0:
                    return
                batch = make(n)
                at = len(ids)
                ids.extend([""] * n)  # places kept, so each batch's ids land in order
            made = await executor.execute(AGENT, Ingest(tuple(batch)))
            ids[at : at + n] = [r.id for r in made]
            done += n
            progress.update(done)

    await asyncio.gather(*(worker() for _ in range(workers)))
    progress.finish(done)
    return ids
