"""The gateway's connections: one asyncpg pool, JSON codecs, and no reset round trip.

asyncpg's default release runs a reset query on every connection handed back; the
gateway changes no session state on pooled connections (the feed listens on its
own connection), so that round trip buys nothing.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg
import orjson

from store.database import asyncpg_url

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
# A connection of our own or one borrowed from the pool: statements run the same.
Conn: TypeAlias = (
    "asyncpg.Connection[asyncpg.Record] | asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"
)


def _encode(value: Any) -> str:
    return orjson.dumps(value).decode()


async def _init(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, encoder=_encode, decoder=orjson.loads, schema="pg_catalog")


async def _no_reset(conn: asyncpg.Connection) -> None:
    return None


def plain_url(url: str) -> str:
    """asyncpg takes postgresql://, not SQLAlchemy's dialect form."""
    return asyncpg_url(url).replace("postgresql+asyncpg://", "postgresql://", 1)


async def create_pool(url: str, size: int) -> Pool:
    """A pool of `size` connections, all opened at start so a burst finds them ready."""
    pool: Pool = await asyncpg.create_pool(
        plain_url(url),
        min_size=size,
        max_size=size,
        init=_init,
        reset=_no_reset,
        server_settings={"application_name": "edgeloom"},
    )
    return pool


async def connect(url: str) -> asyncpg.Connection[asyncpg.Record]:
    """One connection of its own (not pooled), with the same JSON codecs."""
    conn: asyncpg.Connection[asyncpg.Record] = await asyncpg.connect(plain_url(url))
    await _init(conn)
    return conn
