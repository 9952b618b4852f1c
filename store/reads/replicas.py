"""Reads on PostgreSQL standbys (streaming replication), writes on the primary.

A read goes to a standby that is up and within `max_lag_bytes` of the primary (in turn,
when there are several); with none, to the primary. A read that must see a write the
client made (it sent the write's LSN back) goes to a standby only once it has replayed
that LSN: its replay position is polled for at most `lsn_wait` seconds, then the primary
answers. Reads of a request after its own writes go to the primary, which has them.

A standby whose connection fails is skipped until the next health check (every
`check_seconds`) finds it up and close enough again; the read that met the failure is
answered by the primary.

LSNs are WAL positions as integers (PostgreSQL writes them `X/Y`, two hex halves).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import asyncpg

from store.pool import Conn, Pool, connect, plain_url

log = logging.getLogger("edgeloom.replicas")

Lsn: TypeAlias = int

# Errors of a standby that is down, restarting, or cancelled a read to replay WAL
# (a recovery conflict): the read is answered by the primary instead.
STANDBY_FAILURES: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.SerializationError,
)
_CHECK_FAILURES: tuple[type[BaseException], ...] = (*STANDBY_FAILURES, asyncpg.PostgresError)
DEFAULT_MAX_LAG_BYTES = 16 * 1024 * 1024
DEFAULT_LSN_WAIT = 0.05
DEFAULT_CHECK_SECONDS = 1.0
_POLL_SECONDS = 0.002
_CONNECT_SECONDS = 2.0
# Read on the primary's connection right after COMMIT: at or past the commit's record.
COMMIT_LSN = "SELECT pg_current_wal_insert_lsn()::text"
_PRIMARY_LSN = "SELECT pg_current_wal_lsn()::text"
_STANDBY_STATE = "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text"
_REPLAYED = "SELECT pg_last_wal_replay_lsn()::text"


def parse_lsn(text: str | None) -> Lsn | None:
    """`X/Y` as an integer; None for anything else (a client's header is not trusted)."""
    if not text or len(text) > 17:
        return None
    high, slash, low = text.strip().strip('"').partition("/")
    if not slash:
        return None
    try:
        return (int(high, 16) << 32) + int(low, 16)
    except ValueError:
        return None


def read_urls(text: str | None) -> tuple[str, ...]:
    """The standbys' URLs of EDGELOOM_READ_URLS (comma separated)."""
    return tuple(url.strip() for url in (text or "").split(",") if url.strip())


def format_lsn(lsn: Lsn) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


@dataclass(frozen=True)
class ReplicaOptions:
    """The standbys reads go to, and when one is skipped."""

    urls: tuple[str, ...] = ()
    # A standby more WAL bytes than this behind the primary is skipped.
    max_lag_bytes: int = DEFAULT_MAX_LAG_BYTES
    # How long a read that must see an LSN waits for a standby to replay it.
    lsn_wait: float = DEFAULT_LSN_WAIT
    check_seconds: float = DEFAULT_CHECK_SECONDS


@dataclass(slots=True)
class Freshness:
    """What one caller's reads must see: the LSN the client sent back, or everything
    (`primary`: the feed renders what just committed; a request read after it wrote,
    `written` being its newest write's LSN)."""

    after: Lsn | None = None
    written: Lsn | None = None
    primary: bool = False

    def wrote(self, lsn: Lsn | None) -> None:
        if lsn is not None and (self.written is None or lsn > self.written):
            self.written = lsn


@dataclass(eq=False)
class Standby:
    """One standby: its pool, and what the last health check or read learned."""

    url: str
    name: str
    pool_size: int
    statement_timeout: float | None = None  # the primary pool's, for the same requests
    pool: Pool = field(init=False)
    up: bool = False
    replayed: Lsn = 0
    lag_bytes: int | None = None

    def __post_init__(self) -> None:
        # Connects as reads need.
        self.pool = Pool(plain_url(self.url), self.pool_size, self.statement_timeout)

    def seen(self, replayed: Lsn | None) -> None:
        if replayed is not None and replayed > self.replayed:
            self.replayed = replayed


@dataclass(frozen=True, slots=True)
class Route:
    """Where one read runs: the pool, and its standby (None: the primary)."""

    pool: Pool
    standby: Standby | None = None


class Replicas:
    """The primary's pool and the standbys; chooses where each read runs."""

    def __init__(
        self,
        primary: Pool,
        options: ReplicaOptions = ReplicaOptions(),
        pool_size: int = 4,
    ) -> None:
        self.primary = primary
        self.options = options
        self.standbys = [
            Standby(url, f"standby-{n + 1}", pool_size, primary.statement_timeout)
            for n, url in enumerate(options.urls)
        ]
        self._next = 0
        # Reads served, by where: "primary" or "standby" (gql.server.metrics samples them).
        self.served: dict[str, int] = {"primary": 0, "standby": 0}
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def enabled(self) -> bool:
        return bool(self.standbys)

    def _usable(self) -> list[Standby]:
        usable = [s for s in self.standbys if s.up]
        if len(usable) > 1:
            self._next = (self._next + 1) % len(usable)
            usable = usable[self._next :] + usable[: self._next]
        return usable

    async def route(self, freshness: Freshness | None = None) -> Route:
        """The pool a read runs on."""
        if not self.standbys:
            return Route(self.primary)  # no routing step
        return await self._choose(freshness or Freshness())

    def on_primary(self) -> Route:
        """The primary, for a read a standby failed."""
        return Route(self.primary)

    def answered(self, route: Route) -> None:
        """Count a read served (once its first statement is answered) in `served`."""
        self.served["primary" if route.standby is None else "standby"] += 1

    async def _choose(self, freshness: Freshness) -> Route:
        if freshness.primary or freshness.written is not None:
            return Route(self.primary)
        usable = self._usable()
        needed = freshness.after
        for standby in usable:
            if needed is None or standby.replayed >= needed:
                return Route(standby.pool, standby)
        if needed is not None and usable and self.options.lsn_wait > 0:
            standby = usable[0]
            if await self._wait_for(standby, needed):
                return Route(standby.pool, standby)
        return Route(self.primary)

    async def _wait_for(self, standby: Standby, lsn: Lsn) -> bool:
        """Whether `standby` replays `lsn` within the bounded wait."""
        deadline = time.monotonic() + self.options.lsn_wait
        try:
            async with standby.pool.acquire() as conn:
                while True:
                    standby.seen(parse_lsn(await conn.fetchval(_REPLAYED)))
                    if standby.replayed >= lsn:
                        return True
                    if time.monotonic() >= deadline:
                        return False
                    await asyncio.sleep(_POLL_SECONDS)
        except STANDBY_FAILURES as exc:
            self.failed(standby, exc)
            return False

    def failed(self, standby: Standby, error: BaseException) -> None:
        """A read on `standby` failed: skip it until a health check finds it up; its
        connections are dropped, since after a restart none of them works."""
        if standby.up:
            log.warning("standby %s skipped: %s", standby.name, error)
        standby.up = False
        old = standby.pool
        standby.pool = Pool(plain_url(standby.url), standby.pool_size, standby.statement_timeout)
        task = asyncio.get_running_loop().create_task(old.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def check(self) -> None:
        """One health check of every standby: up, a standby, and within the lag bound."""
        if not self.standbys:
            return
        async with self.primary.acquire() as conn:
            primary = parse_lsn(await conn.fetchval(_PRIMARY_LSN)) or 0
        await asyncio.gather(*(self._check(s, primary) for s in self.standbys))

    async def _check(self, standby: Standby, primary: Lsn) -> None:
        try:
            conn = await asyncio.wait_for(connect(standby.url), _CONNECT_SECONDS)
            try:
                row = await asyncio.wait_for(conn.fetchrow(_STANDBY_STATE), _CONNECT_SECONDS)
            finally:
                conn.terminate()
        except _CHECK_FAILURES as exc:
            if standby.up:
                self.failed(standby, exc)
            standby.lag_bytes = None
            return
        assert row is not None
        in_recovery, replayed = row[0], parse_lsn(row[1])
        if not in_recovery or replayed is None:
            # Promoted (or not a standby at all): it no longer follows this primary.
            if standby.up:
                log.warning("standby %s skipped: it is not in recovery", standby.name)
            standby.up = False
            standby.lag_bytes = None
            return
        standby.seen(replayed)
        standby.lag_bytes = max(0, primary - replayed)
        close_enough = standby.lag_bytes <= self.options.max_lag_bytes
        if standby.up and not close_enough:
            log.warning("standby %s skipped: %d bytes behind", standby.name, standby.lag_bytes)
        elif not standby.up and close_enough:
            log.info("standby %s serves reads", standby.name)
        standby.up = close_enough

    async def check_every(self) -> None:
        """`check` for as long as the gateway serves (a lifespan task)."""
        while True:
            with contextlib.suppress(Exception):
                await self.check()
            await asyncio.sleep(self.options.check_seconds)

    async def fetchrow(self, freshness: Freshness | None, query: str, *args: Any) -> Any:
        """One statement on the chosen server; a standby's failure is answered by the
        primary. A statement that fails half-way leaves its connection unused (it may be
        inside an implicit transaction)."""
        route = await self.route(freshness)
        if route.standby is not None:
            try:
                row = await fetchrow_once(route.pool, query, args)
            except STANDBY_FAILURES as exc:
                self.failed(route.standby, exc)
                route = self.on_primary()
            else:
                self.answered(route)
                return row
        row = await fetchrow_once(route.pool, query, args)
        self.answered(route)
        return row

    async def close(self) -> None:
        for standby in self.standbys:
            await standby.pool.close()
        for task in list(self._closing):
            with contextlib.suppress(Exception):
                await task


async def fetchrow_once(pool: Pool, query: str, args: Sequence[Any]) -> Any:
    """One statement on a connection of `pool`; one whose statement failed half-way may be
    left inside an implicit transaction, so it does not go back to the pool as it is."""
    async with pool.acquire() as conn:
        try:
            return await conn.fetchrow(query, *args)
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError):
            conn.terminate()
            raise


async def commit_lsn(conn: Conn) -> Lsn | None:
    """The LSN a write just committed on `conn` is at or before."""
    return parse_lsn(await conn.fetchval(COMMIT_LSN))
