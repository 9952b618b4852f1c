"""One read snapshot: every statement of one GraphQL operation sees the same moment.

PostgreSQL fixes a REPEATABLE READ snapshot at a transaction's first statement,
so a `Snapshot` opens one `REPEATABLE READ READ ONLY` transaction on one pooled
connection at its first read and ends it when the operation ends. Operations that
are one statement do not need this (the compiled read path runs them on the pool
with no transaction: one statement is a snapshot by itself). Resolvers of one
operation run concurrently and one asyncpg connection runs one statement at a
time, so statements take turns under a lock.

The snapshot runs where `store.reads.replicas` routes it: a standby when one is up and
has what the caller must see, else the primary. A standby that fails at the snapshot's
start or its first statement is skipped and the primary answers instead; one that fails
later fails the statement (its earlier statements saw the standby's moment).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import asyncpg

from store.pool import Pool
from store.reads import lane_floor
from store.reads.replicas import STANDBY_FAILURES, Freshness, Replicas, Route

BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


class Reader(Protocol):
    """What the read queries need: asyncpg's fetch methods (a connection or a snapshot)."""

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]: ...

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None: ...

    async def fetchval(self, query: str, *args: Any) -> Any: ...


class Snapshot:
    """The reads of one operation, on one connection in one read-only transaction."""

    def __init__(
        self,
        source: Pool | Replicas,
        freshness: Freshness | None = None,
        lanes: Callable[[], Awaitable[lane_floor.Floor | None]] | None = None,
    ) -> None:
        # The lanes PostgreSQL lets the transaction read, asked for at its start (None:
        # none, so nothing is visible).
        self._lanes = lanes
        self._replicas = source if isinstance(source, Replicas) else Replicas(source)
        self._freshness = freshness
        self._route: Route | None = None
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self.statements = 0
        # Statements answered on the current connection (a standby failing before any
        # is answered, the primary takes over).
        self._answered = 0

    @property
    def on_standby(self) -> bool:
        """Whether the snapshot's reads run on a standby."""
        return self._route is not None and self._route.standby is not None

    async def _begin(self, route: Route) -> Any:
        floor = None if self._lanes is None else await self._lanes()
        conn = await route.pool.acquire()
        try:
            # The transaction and its lanes in one round trip (store.reads.lane_floor).
            await conn.execute(lane_floor.begin(BEGIN, floor, conn))
        except BaseException:
            # Whatever state it is in, it is not one to hand to the next reader.
            conn.terminate()
            await route.pool.release(conn)
            raise
        return conn

    async def _connection(self) -> Any:
        if self._conn is None:
            route = await self._replicas.route(self._freshness)
            try:
                self._conn = await self._begin(route)
            except STANDBY_FAILURES as exc:
                if route.standby is None:
                    raise
                self._replicas.failed(route.standby, exc)
                route = self._replicas.on_primary()
                self._conn = await self._begin(route)
            self._route = route
            self._answered = 0
        return self._conn

    async def _run(self, method: str, query: str, args: tuple[Any, ...]) -> Any:
        async with self._lock:
            conn = await self._connection()
            self.statements += 1
            try:
                found = await getattr(conn, method)(query, *args)
            except STANDBY_FAILURES as exc:
                route = self._route
                if route is None or route.standby is None or self._answered:
                    raise
                self._replicas.failed(route.standby, exc)
                self._conn, self._route = None, None
                conn.terminate()
                await route.pool.release(conn)
                self._route = self._replicas.on_primary()
                self._conn = conn = await self._begin(self._route)
                found = await getattr(conn, method)(query, *args)
            if not self._answered and self._route is not None:
                self._replicas.answered(self._route)
            self._answered += 1
            return found

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await self._run("fetch", query, args)
        return rows

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        row: asyncpg.Record | None = await self._run("fetchrow", query, args)
        return row

    async def fetchval(self, query: str, *args: Any) -> Any:
        return await self._run("fetchval", query, args)

    async def close(self) -> None:
        """End the transaction and hand the connection back; a later read opens a new one."""
        async with self._lock:
            conn, self._conn = self._conn, None
            route, self._route = self._route, None
            if conn is None or route is None:
                return
            try:
                # Read only: nothing to commit, and ROLLBACK cannot fail on a conflict.
                await conn.execute("ROLLBACK")
            except BaseException as exc:
                # A connection in an unknown state must not go back to the pool.
                conn.terminate()
                if route.standby is not None and isinstance(exc, STANDBY_FAILURES):
                    return  # its reads were answered; the standby's pool takes it back
                raise
            finally:
                await route.pool.release(conn)
