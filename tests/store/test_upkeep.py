"""A bulk write has its tables analyzed, and vacuumed where the serving role may, soon
after, in the background, with no further request; writes below the threshold have none
analyzed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import pytest

from policies.loader import DEV_POLICY_YAML
from store.kinds.policy.commands import ApplyPolicy
from store.kinds.policy.in_force import PolicyCache
from store.kinds.record.commands import Ingest, NewRecord
from store.kinds.record.counts import FOLD_AFTER_APPENDS
from store.ledger.executor import Executor
from store.ledger.upkeep import MAINTAIN_SINCE
from store.operations.roles import runtime_url
from store.pool import create_pool
from tests.support import Databases, sql

AFTER = 400


async def _analyzed(conn: asyncpg.Connection, what: str = "analyze") -> set[str]:
    rows = await conn.fetch(
        f"SELECT relname FROM pg_stat_user_tables WHERE last_{what} IS NOT NULL"
    )
    return {r[0] for r in rows}


async def _until(conn: asyncpg.Connection, table: str, what: str = "analyze") -> set[str]:
    """The tables analyzed (or vacuumed) once `table` is, or after ten seconds."""
    done: set[str] = set()
    for _ in range(100):
        done = await _analyzed(conn, what)
        if table in done:
            break
        await asyncio.sleep(0.1)
    return done


async def _ingest(executor: Executor, n: int) -> None:
    batch = tuple(NewRecord(f"note {k}", (f"topic:t{k % 7}",)) for k in range(n))
    await executor.execute("dev", Ingest(batch))


@contextlib.asynccontextmanager
async def _writer(
    databases: Databases, as_owner: bool = False
) -> AsyncIterator[tuple[str, Executor]]:
    """A fresh database's URL and an executor serving as the gateway does (or as the
    tables' owner, as it does when its own role cannot log in), analyzing after AFTER
    rows."""
    url = await databases.create()
    pool = await create_pool(url if as_owner else runtime_url(url), 2)
    executor = Executor(pool, PolicyCache.empty(), analyze_after=AFTER)
    try:
        await executor.execute("dev", ApplyPolicy(DEV_POLICY_YAML, "test", None, executor.policies))
        yield url, executor
    finally:
        await executor.upkeep.finish()
        await pool.close()


def _maintain(conn: asyncpg.Connection) -> bool:
    return conn.get_server_version().major * 10_000 >= MAINTAIN_SINCE


async def test_a_bulk_write_has_its_tables_analyzed_in_the_background(
    databases: Databases,
) -> None:
    async with _writer(databases) as (url, executor), sql(url) as conn:
        await _ingest(executor, 50)
        await asyncio.sleep(2)
        assert not await _analyzed(conn)
        await _ingest(executor, AFTER)
        analyzed = await _until(conn, "records")
        assert {"records", "edge_properties", "ledger", "audit_events"} <= analyzed


async def test_a_large_count_fold_has_the_deltas_vacuumed(databases: Databases) -> None:
    async with _writer(databases) as (url, executor), sql(url) as conn:
        # The fold is due after FOLD_AFTER_APPENDS appends.
        for _ in range(FOLD_AFTER_APPENDS):
            await _ingest(executor, 5)
        assert await conn.fetchval("SELECT count(*) FROM member_counts")  # folded
        # Vacuumed where the gateway's role may (PostgreSQL 17 on), else analyzed.
        done = await _until(conn, "member_deltas", "vacuum" if _maintain(conn) else "analyze")
        assert "member_deltas" in done


async def _all_visible(conn: asyncpg.Connection, table: str) -> int:
    return int(await conn.fetchval("SELECT relallvisible FROM pg_class WHERE relname = $1", table))


@pytest.mark.parametrize("as_owner", [False, True], ids=["gateway role", "owner"])
async def test_a_bulk_write_has_its_tables_vacuumed_where_the_role_may(
    databases: Databases, as_owner: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async with _writer(databases, as_owner) as (url, executor), sql(url) as conn:
        await _ingest(executor, AFTER)
        analyzed = await _until(conn, "records")
        assert {"records", "edge_properties"} <= analyzed
        may = as_owner or _maintain(conn)
        vacuumed = await _analyzed(conn, "vacuum")
        # The visibility map set: index-only scans need not visit the heap.
        visible = await _all_visible(conn, "edge_properties")
        if may:
            assert {"records", "edge_properties", "ledger", "audit_events"} <= vacuumed
            assert visible > 0
        else:
            # PostgreSQL before 17 has no privilege to grant for VACUUM: analyzed as the
            # owner, and no warning of a skipped vacuum.
            assert not {"records", "edge_properties"} & vacuumed
            assert visible == 0
        assert not [r for r in caplog.records if r.name == "store.ledger.upkeep"]
