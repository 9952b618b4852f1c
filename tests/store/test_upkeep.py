"""A bulk write has its tables analyzed soon after, in the background, with no further
request; writes below the threshold have none analyzed."""

from __future__ import annotations

import asyncio

import asyncpg

from policies.loader import DEV_POLICY_YAML
from store.kinds.policy.commands import ApplyPolicy
from store.kinds.policy.in_force import PolicyCache
from store.kinds.record.commands import Ingest, NewRecord
from store.ledger.executor import Executor
from store.operations.roles import runtime_url
from store.pool import create_pool
from tests.support import Databases, sql

AFTER = 400


async def _analyzed(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch(
        "SELECT relname FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL"
    )
    return {r[0] for r in rows}


async def _ingest(executor: Executor, n: int) -> None:
    batch = tuple(NewRecord(f"note {k}", ()) for k in range(n))
    await executor.execute("dev", Ingest(batch))


async def test_a_bulk_write_has_its_tables_analyzed_in_the_background(
    databases: Databases,
) -> None:
    url = await databases.create()
    pool = await create_pool(runtime_url(url), 2)
    try:
        cache = PolicyCache.empty()
        executor = Executor(pool, cache, analyze_after=AFTER)
        await executor.execute("dev", ApplyPolicy(DEV_POLICY_YAML, "test", None, cache))
        async with sql(url) as conn:
            await _ingest(executor, 50)
            await asyncio.sleep(2)
            assert not await _analyzed(conn)
            await _ingest(executor, AFTER)
            analyzed: set[str] = set()
            for _ in range(100):
                analyzed = await _analyzed(conn)
                if "records" in analyzed:
                    break
                await asyncio.sleep(0.1)
            assert {"records", "edge_properties", "ledger", "audit_events"} <= analyzed
    finally:
        await pool.close()
