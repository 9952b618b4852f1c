"""The gateway's connection pool: fair hand-out, no lost places, recovery from lost connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from store.pool import Pool, PoolClosedError, create_pool
from tests.support import Databases, sql


@pytest.fixture
async def pool(databases: Databases) -> AsyncIterator[Pool]:
    made = await create_pool(await databases.create(), 2)
    try:
        yield made
    finally:
        await made.close()


async def backend(conn: object) -> int:
    pid: int = await conn.fetchval("SELECT pg_backend_pid()")  # type: ignore[attr-defined]
    return pid


async def test_waiters_are_served_in_arrival_order(pool: Pool) -> None:
    a, b = await pool.acquire(), await pool.acquire()
    served: list[str] = []

    async def wait(name: str) -> None:
        async with pool.acquire() as conn:
            served.append(name)
            await conn.fetchval("SELECT 1")

    waiting = [asyncio.create_task(wait(n)) for n in ("first", "second", "third")]
    await asyncio.sleep(0.05)
    assert served == []  # both places are taken
    await pool.release(a)
    await pool.release(b)
    await asyncio.gather(*waiting)
    assert served == ["first", "second", "third"]


async def test_json_comes_back_decoded(pool: Pool) -> None:
    async with pool.acquire() as conn:
        assert await conn.fetchval("""SELECT '{"a": [1, 2]}'::jsonb""") == {"a": [1, 2]}


async def test_a_connection_lost_while_out_is_replaced(pool: Pool) -> None:
    async with pool.acquire() as conn:
        lost = await backend(conn)
        conn.terminate()
    seen = set()
    for _ in range(3):
        async with pool.acquire() as conn:
            seen.add(await backend(conn))
    assert lost not in seen
    assert len(seen) <= 2


async def test_connections_killed_by_the_server_are_reopened(databases: Databases) -> None:
    url = await databases.create()
    pool = await create_pool(url, 2)
    try:
        a, b = await pool.acquire(), await pool.acquire()
        pids = {await backend(a), await backend(b)}
        await pool.release(a)
        await pool.release(b)
        async with sql(url) as admin:
            for pid in pids:
                await admin.execute("SELECT pg_terminate_backend($1)", pid)
        await asyncio.sleep(0.2)
        # The first statement on a killed connection fails; the pool hands out no
        # connection it knows is closed, and opens a new one in its place.
        for _ in range(4):
            try:
                async with pool.acquire() as conn:
                    assert await backend(conn) not in pids
                    break
            except (OSError, asyncpg.InterfaceError, asyncpg.PostgresError):
                continue
        else:
            raise AssertionError("the pool never reopened a connection")
    finally:
        await pool.close()


@pytest.mark.parametrize("in_transaction", [False, True])
async def test_a_block_cancelled_mid_statement_ends_it_on_the_server_then_reuses_it(
    databases: Databases, in_transaction: bool
) -> None:
    url = await databases.create()
    pool = await create_pool(url, 1)
    started = asyncio.Event()
    pid: list[int] = []

    async def slow() -> None:
        async with pool.acquire() as conn:
            pid.append(await backend(conn))
            started.set()
            if in_transaction:
                async with conn.transaction():
                    await conn.execute("SELECT pg_sleep(30)")
            else:
                await conn.execute("SELECT pg_sleep(30)")

    try:
        task = asyncio.create_task(slow())
        await started.wait()
        async with sql(url) as watcher:
            sleeping = "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'"
            while not await watcher.fetchval(sleeping, pid[0]):
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The one connection is handed on only once its statement has ended.
            async with asyncio.timeout(3), pool.acquire() as conn:
                assert await watcher.fetchval(sleeping, pid[0]) == 0
                assert await backend(conn) == pid[0]
                assert not conn.is_in_transaction()
                assert await conn.fetchval("SELECT 2") == 2
    finally:
        await pool.close()


async def test_a_cancelled_waiter_loses_no_place(pool: Pool) -> None:
    a, b = await pool.acquire(), await pool.acquire()
    waiter = asyncio.create_task(pool._take())
    await asyncio.sleep(0.01)
    waiter.cancel()
    await pool.release(a)  # handed to the cancelled waiter, or kept: never lost
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await pool.release(b)
    held = [await asyncio.wait_for(pool.acquire(), 2) for _ in range(2)]
    for conn in held:
        await pool.release(conn)


async def test_a_connection_left_in_a_transaction_is_not_reused(pool: Pool) -> None:
    conn = await pool.acquire()
    pid = await backend(conn)
    await conn.execute("BEGIN")
    await pool.release(conn)
    assert conn.is_closed()
    for _ in range(2):
        async with pool.acquire() as again:
            assert await backend(again) != pid
            assert not again.is_in_transaction()


async def test_after_close_no_connection_is_handed_out(databases: Databases) -> None:
    pool = await create_pool(await databases.create(), 1)
    held = await pool.acquire()
    waiter = asyncio.create_task(pool._take())
    await asyncio.sleep(0.01)
    await pool.close()
    with pytest.raises(PoolClosedError):
        await waiter
    with pytest.raises(PoolClosedError):
        await pool.acquire()
    await pool.release(held)
    assert held.is_closed()


async def test_no_statement_is_jit_compiled(pool: Pool) -> None:
    # Compiling a search's statement took seconds where it runs in milliseconds.
    async with pool.acquire() as conn, conn.transaction():
        assert await conn.fetchval("SHOW jit") == "off"
        await conn.execute("SET LOCAL jit_above_cost = 0")
        plan = await conn.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT sum(x) FROM generate_series(1, 1000) x"
        )
        assert "JIT" not in plan[0]  # the pool reads JSON as Python values
