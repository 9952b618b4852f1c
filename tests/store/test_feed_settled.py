"""How far a poll of the feed may go: never past a position a running writer may still
fill, and past one that no writer can."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from store.feed.settled import first_gap, settled_through
from store.pool import create_pool
from tests.support import Databases, plain

INSERT = """
INSERT INTO audit_events (id, kind, record_id, lane, actor, at, payload,
                          version_before, version_after, object_kind, object_id)
VALUES ($1, 'sr_ingested', NULL, 'default', 'test', now(), '{}'::jsonb, NULL, 1, 'record', 'x')
RETURNING seq
"""


async def insert(conn: asyncpg.Connection) -> int:
    seq: int = await conn.fetchval(INSERT, "ev_" + uuid.uuid4().hex)
    return seq


def test_the_first_gap_is_the_first_position_skipped() -> None:
    assert first_gap(4, [5, 6, 7]) is None
    assert first_gap(4, [6, 7]) == 5
    assert first_gap(4, [5, 7]) == 6
    assert first_gap(4, []) is None


@pytest.fixture(scope="module")
async def database(databases: Databases) -> str:
    return await databases.create()


async def test_a_poll_waits_for_the_writer_that_holds_the_gap(database: str) -> None:
    pool = await create_pool(database, 2)
    writer = await asyncpg.connect(plain(database))
    other = await asyncpg.connect(plain(database))
    try:
        start = await insert(other)
        held = writer.transaction()
        await held.start()
        gap = await insert(writer)
        later = await insert(other)  # committed, past the one still open
        assert later > gap > start
        poll = asyncio.create_task(settled_through(pool, start, wait=30))
        await asyncio.sleep(0.3)
        # Answered now, it would hand out `later` and its cursor would skip `gap` for good.
        assert not poll.done()
        await held.commit()
        assert await poll == later
    finally:
        await writer.close()
        await other.close()
        await pool.close()


async def test_a_gap_no_writer_can_fill_is_passed_at_once(database: str) -> None:
    pool = await create_pool(database, 2)
    conn = await asyncpg.connect(plain(database))
    try:
        start = await insert(conn)
        rolled = conn.transaction()
        await rolled.start()
        await insert(conn)
        await rolled.rollback()
        after = await insert(conn)
        assert await settled_through(pool, start, wait=30) == after
        assert await settled_through(pool, after, wait=30) == after
    finally:
        await conn.close()
        await pool.close()
