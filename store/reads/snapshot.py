"""One read snapshot: every statement of one GraphQL operation sees the same moment.

PostgreSQL fixes a REPEATABLE READ snapshot at a transaction's first statement,
so a `Snapshot` opens one `REPEATABLE READ READ ONLY` transaction on one pooled
connection at its first read and ends it when the operation ends. Operations that
are one statement do not need this (the compiled read path runs them on the pool
with no transaction: one statement is a snapshot by itself). Resolvers of one
operation run concurrently and one asyncpg connection runs one statement at a
time, so statements take turns under a lock.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import asyncpg

from store.pool import Pool

BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


class Reader(Protocol):
    """What the read queries need: asyncpg's fetch methods (a connection or a snapshot)."""

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]: ...

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None: ...

    async def fetchval(self, query: str, *args: Any) -> Any: ...


class Snapshot:
    """The reads of one operation, on one connection in one read-only transaction."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self.statements = 0

    async def _connection(self) -> Any:
        if self._conn is None:
            conn = await self._pool.acquire()
            try:
                await conn.execute(BEGIN)
            except BaseException:
                # Whatever state it is in, it is not one to hand to the next reader.
                conn.terminate()
                await self._pool.release(conn)
                raise
            self._conn = conn
        return self._conn

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        async with self._lock:
            conn = await self._connection()
            self.statements += 1
            rows: list[asyncpg.Record] = await conn.fetch(query, *args)
            return rows

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        async with self._lock:
            conn = await self._connection()
            self.statements += 1
            row: asyncpg.Record | None = await conn.fetchrow(query, *args)
            return row

    async def fetchval(self, query: str, *args: Any) -> Any:
        async with self._lock:
            conn = await self._connection()
            self.statements += 1
            return await conn.fetchval(query, *args)

    async def close(self) -> None:
        """End the transaction and hand the connection back; a later read opens a new one."""
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            try:
                # Read only: nothing to commit, and ROLLBACK cannot fail on a conflict.
                await conn.execute("ROLLBACK")
            except BaseException:
                # A connection in an unknown state must not go back to the pool.
                conn.terminate()
                raise
            finally:
                await self._pool.release(conn)
