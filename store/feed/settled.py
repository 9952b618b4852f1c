"""How far a poll of the feed may go: the feed position up to which every event that
will ever commit is committed.

An event's position is taken before its transaction commits, so a reader asking for
"every event after position P" can see P+2 before P+1 commits, and would skip P+1 for
good once it moves its cursor past P+2. The live feed waits at such a gap (store.feed.live);
a poll (MCP clients without a WebSocket) answers up to the first gap that a running writer
may still fill, after waiting a bounded time for those writers to finish, as the live feed
does. Positions only, lanes aside: what the reader may see is decided by the read itself.
"""

from __future__ import annotations

import asyncio
import time

from store.pool import Conn, Pool
from store.reads import lane_floor

ORDER_WAIT = 1.0
"""The most seconds a poll waits at a gap, as the live feed's reader does."""
SPAN = 1000
"""How many positions one look covers; a poll past them answers with a next page."""

_LOOK = """
SELECT ARRAY(SELECT seq FROM audit_events WHERE seq > $1 ORDER BY seq LIMIT $2) AS seqs,
       ARRAY(SELECT backend_xid::text::bigint FROM pg_stat_activity
             WHERE backend_xid IS NOT NULL AND datname = current_database()
               AND pid <> pg_backend_pid()) AS writers
"""
_STILL_RUNNING = """
SELECT ARRAY(SELECT backend_xid::text::bigint FROM pg_stat_activity
             WHERE backend_xid IS NOT NULL AND datname = current_database()
               AND backend_xid::text::bigint = ANY($1::bigint[])) AS running
"""


def first_gap(after: int, seqs: list[int]) -> int | None:
    """The first position after `after` that `seqs` (ascending) skips, below its last."""
    expected = after + 1
    for seq in seqs:
        if seq != expected:
            return expected
        expected += 1
    return None


async def settled_through(pool: Pool, after: int, wait: float = ORDER_WAIT) -> int:
    """The highest position h >= `after` such that no event at or below h can still
    appear: every position up to it is committed, or was skipped for good (its writer
    rolled back, or was still running after `wait` seconds)."""
    # Positions of every lane's events: the gateway's own read, as the crossing role.
    async with pool.acquire() as conn, lane_floor.crossing(conn):
        seqs, writers = await _look(conn, after)
        gap = first_gap(after, seqs)
        if gap is None or not writers:
            return seqs[-1] if seqs else after
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not await conn.fetchval(_STILL_RUNNING, writers):
                break
            await asyncio.sleep(0.02)
        # Looked at again: what the writers committed is there now; what is still
        # missing is skipped for good, as the live feed passes a gap after its wait.
        seqs, _ = await _look(conn, after)
        return seqs[-1] if seqs else after


async def _look(conn: Conn, after: int) -> tuple[list[int], list[int]]:
    row = await conn.fetchrow(_LOOK, after, SPAN)
    assert row is not None
    return list(row["seqs"]), list(row["writers"])
