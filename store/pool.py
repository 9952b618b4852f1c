"""The gateway's connections: a fixed set of asyncpg connections with JSON codecs.

asyncpg's own pool wraps every connection it hands out in a proxy, and shields every
release in a task of its own, which a compiled read pays on every request (bench/README.md
has the figures). This pool hands out the
connections themselves, takes them back without awaiting anything, and runs no reset
query: the gateway changes no session state on pooled connections (the feed listens
on its own connection).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Generator
from types import TracebackType
from typing import Any, TypeAlias

import asyncpg
import orjson

from store.database import asyncpg_url

Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record]"


def _encode_jsonb(value: Any) -> bytes:
    return b"\x01" + orjson.dumps(value)  # jsonb's binary format: a version byte, the text


def _decode_jsonb(data: bytes) -> Any:
    return orjson.loads(memoryview(data)[1:])


async def json_codecs(conn: asyncpg.Connection) -> None:
    """JSON and JSONB as Python values, by orjson, in the binary format: the bytes orjson
    writes go to the server as they are (a text codec would decode them to a str that
    asyncpg encodes again)."""
    await conn.set_type_codec(
        "jsonb",
        encoder=_encode_jsonb,
        decoder=_decode_jsonb,
        schema="pg_catalog",
        format="binary",
    )
    # json's binary format is its text.
    await conn.set_type_codec(
        "json", encoder=orjson.dumps, decoder=orjson.loads, schema="pg_catalog", format="binary"
    )


# Never JIT-compile a statement: the gateway's statements are short, and PostgreSQL
# decides to compile by the planner's cost, which a search's estimates (a row a record)
# put far past `jit_above_cost` for a statement that runs in milliseconds; compiling it
# took seconds on a server built with LLVM (PostgreSQL 15 from Debian's packages).
SESSION_SETTINGS = {"jit": "off"}


class PoolClosedError(asyncpg.InterfaceError):
    """The pool is closing: no more connections are handed out."""


class Pool:
    """`size` connections, handed out first come, first served.

    A connection that comes back closed, inside a transaction, or from a block that
    lost its connection (so a statement may be half-way) is not reused: its place is
    opened afresh by the next acquire, which is also how the pool recovers after a
    PostgreSQL restart. One that comes back from a cancelled block is first given
    the time to end its statement on the server (`_settle`).
    """

    def __init__(self, url: str, size: int, statement_timeout: float | None = None) -> None:
        self._url = url
        self._size = size
        # Every statement on these connections is stopped by PostgreSQL past this many
        # seconds (the time limit of the requests they serve), unless run `unlimited`.
        self.statement_timeout = statement_timeout
        self._settings = {"application_name": "edgeloom", **SESSION_SETTINGS}
        if statement_timeout is not None:
            self._settings["statement_timeout"] = str(max(1, round(statement_timeout * 1000)))
        self._idle: deque[Conn] = deque()
        # None hands a waiter an empty place to open a connection in.
        self._waiters: deque[asyncio.Future[Conn | None]] = deque()
        self._empty = size
        self._closing = False
        self._settling: set[asyncio.Task[None]] = set()

    async def open(self) -> None:
        """Open every connection now, so that a burst finds them ready."""
        opened = await asyncio.gather(
            *(self._connect() for _ in range(self._empty)), return_exceptions=True
        )
        failures = [o for o in opened if isinstance(o, BaseException)]
        if failures:
            for conn in opened:
                if not isinstance(conn, BaseException):
                    conn.terminate()
            raise failures[0]
        self._empty = 0
        self._idle.extend(o for o in opened if not isinstance(o, BaseException))

    async def _connect(self) -> Conn:
        return await _connect(self._url, self._settings)

    async def _fill(self) -> Conn:
        """A new connection in the empty place the caller holds; if it cannot be
        opened, the place is passed on (to a waiter, or left empty)."""
        try:
            return await self._connect()
        except BaseException:
            self._vacate()
            raise

    def get_max_size(self) -> int:
        return self._size

    def usage(self) -> tuple[int, int]:
        """Connections handed out now, and the pool's size."""
        return self._size - len(self._idle) - self._empty, self._size

    def acquire(self) -> _Acquire:
        """A connection: `async with pool.acquire() as conn`, or `await` and `release`."""
        return _Acquire(self)

    async def _take(self) -> Conn:
        while True:
            if self._closing:
                raise PoolClosedError("the connection pool is closed")
            if self._idle:
                conn: Conn | None = self._idle.pop()  # the most recently used: warm
            elif self._empty:
                self._empty -= 1
                conn = await self._fill()
            else:
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    conn = await waiter
                except asyncio.CancelledError:
                    if waiter.done() and not waiter.cancelled():
                        given = waiter.result()
                        if given is None:
                            self._vacate()  # pass the empty place on
                        else:
                            self._give_back(given, reuse=True)
                    else:
                        with contextlib.suppress(ValueError):
                            self._waiters.remove(waiter)
                    raise
                if conn is None:  # an empty place, handed over by _vacate
                    conn = await self._fill()
            assert conn is not None
            if conn.is_closed():
                self._vacate()
                continue
            return conn

    async def release(self, conn: Conn) -> None:
        self._give_back(conn, reuse=True)

    def _give_back(self, conn: Conn | None, reuse: bool) -> None:
        if conn is None:
            return
        if not reuse or self._closing or conn.is_closed() or conn.is_in_transaction():
            conn.terminate()
            self._vacate()
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self._idle.append(conn)

    def _settle_then_give_back(self, conn: Conn) -> None:
        task = asyncio.get_running_loop().create_task(self._settle(conn))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def _settle(self, conn: Conn) -> None:
        """A connection whose statement was cancelled: asyncpg sends the server a cancel
        request from a task of its own, which terminating the connection now would
        abort, leaving the statement running on the server (a disconnected connection
        is noticed only when the statement next writes to it). Its next statement waits
        until the cancelled one has ended; then the connection is reused."""
        reuse = False
        try:
            async with asyncio.timeout(SETTLE_SECONDS):
                await conn.execute("SELECT 1")
                if conn.is_in_transaction():  # known now that the server has answered
                    await conn.execute("ROLLBACK")
            reuse = True
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError):
            pass
        finally:
            self._give_back(conn, reuse=reuse)

    def _vacate(self) -> None:
        """A place lost its connection: the first waiter, if any, opens a new one."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._empty += 1

    async def close(self) -> None:
        """Close the idle connections; those still out are closed as they come back."""
        self._closing = True
        for task in list(self._settling):
            task.cancel()  # its connection is terminated as it comes back
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(PoolClosedError("the connection pool is closed"))
        idle, self._idle = list(self._idle), deque()
        for conn in idle:
            try:
                await asyncio.wait_for(conn.close(), 5)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                conn.terminate()


# A block that ends with one of these may have left a statement half-way.
_UNSAFE = (asyncio.CancelledError, TimeoutError, OSError, asyncpg.InterfaceError)
# Of those, a cancellation leaves the connection sound, its statement being cancelled.
_CANCELLED = (asyncio.CancelledError, TimeoutError)
# How long a cancelled statement may take to end on the server before its connection is
# terminated instead of reused.
SETTLE_SECONDS = 5.0


class _Acquire:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._conn: Conn | None = None

    def __await__(self) -> Generator[Any, None, Conn]:
        return self._pool._take().__await__()

    async def __aenter__(self) -> Conn:
        self._conn = await self._pool._take()
        return self._conn

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        if isinstance(error, _CANCELLED) and conn is not None and not conn.is_closed():
            self._pool._settle_then_give_back(conn)
            return
        unsafe = error is not None and (
            isinstance(error, _UNSAFE) or not isinstance(error, Exception)
        )
        self._pool._give_back(conn, reuse=not unsafe)


def plain_url(url: str) -> str:
    """asyncpg takes postgresql://, not SQLAlchemy's dialect form."""
    return asyncpg_url(url).replace("postgresql+asyncpg://", "postgresql://", 1)


async def create_pool(url: str, size: int, statement_timeout: float | None = None) -> Pool:
    """A pool of `size` connections, all opened at start so a burst finds them ready;
    `statement_timeout`: the seconds any of their statements may run (None: no limit)."""
    pool = Pool(plain_url(url), size, statement_timeout)
    await pool.open()
    return pool


@contextlib.asynccontextmanager
async def unlimited(conn: Conn) -> AsyncIterator[Conn]:
    """`conn` without its pool's statement time limit, for work done off any request
    (VACUUM, a checkpoint over a long stretch of ledger); the limit is back after."""
    await conn.execute("SET statement_timeout = 0")
    try:
        yield conn
    finally:
        # Back to the value the connection opened with.
        await conn.execute("RESET statement_timeout")


async def connect(url: str) -> Conn:
    """One connection of its own (not pooled), with the same JSON codecs."""
    return await _connect(plain_url(url), dict(SESSION_SETTINGS))


# Seconds a connection keeps a prepared statement before preparing it again (asyncpg's
# default is 300). PostgreSQL keeps the generic plan it makes after a statement's fifth
# run until the table is next analyzed: one made while the memory was small may scan a
# table that has since grown (a lock of named records, say, on a server without
# autovacuum). Preparing again a minute later plans for the table as it is then.
STATEMENT_LIFETIME_SECONDS = 60


async def _connect(url: str, server_settings: dict[str, str]) -> Conn:
    conn: Conn = await asyncpg.connect(
        url,
        server_settings=server_settings,
        max_cached_statement_lifetime=STATEMENT_LIFETIME_SECONDS,
    )
    try:
        await json_codecs(conn)
    except BaseException:
        conn.terminate()
        raise
    return conn
