"""The lanes PostgreSQL itself lets a transaction see and write (migration 0032).

Under the gateway's own lane predicate (`store.reads.visibility`), every table holding a
lane's rows has row-level security comparing each row's lane with two settings of the
transaction: `edgeloom.read_lanes` and `edgeloom.write_lanes`. Each is set with
`set_config(..., true)`, so it ends with its transaction and a connection handed to the
next caller holds none: a statement that runs without it sees no row (fail closed).

The settings ride on a statement that is sent anyway, so no read or write waits for one
more round trip: a snapshot's and a write's `BEGIN` (one simple query, `begin`), and the
compiled path's one statement (`gated`: its own implicit transaction, the setting made
by a one-time filter PostgreSQL evaluates before any row is read).

`CROSSING` is the gateway's own work over every lane (folding counts, the expiry sweep,
the feed's poller): it runs as the crossing role (`SET LOCAL ROLE`), which the policies
let through, never for a request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from sqlalchemy.ext.asyncio import AsyncConnection

# The role the gateway serves as, and the one its own work over every lane runs as.
RUNTIME_ROLE: Final = "edgeloom_runtime"
CROSSING_ROLE: Final = "edgeloom_crossing"
READ_LANES: Final = "edgeloom.read_lanes"
WRITE_LANES: Final = "edgeloom.write_lanes"


@dataclass(frozen=True, slots=True)
class Lanes:
    """The lanes a transaction may read and write."""

    read: tuple[str, ...]
    write: tuple[str, ...] = ()

    @classmethod
    def of(cls, read: Iterable[str], write: Iterable[str] = ()) -> Lanes:
        return cls(tuple(sorted(set(read))), tuple(sorted(set(write))))

    def __or__(self, other: Lanes) -> Lanes:
        return Lanes.of((*self.read, *other.read), (*self.write, *other.write))


class Crossing:
    """The gateway's own work over every lane (see the module's doc)."""

    def __repr__(self) -> str:
        return "CROSSING"


CROSSING: Final = Crossing()
Floor = Lanes | Crossing


def joined(lanes: Iterable[str]) -> str:
    """A setting's value: the lanes, comma-separated (a lane's name holds no comma)."""
    return ",".join(lanes)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def settings_sql(floor: Floor | None, role: str | None) -> str:
    """SQL run inside a transaction that gives it `floor` (None: no setting, nothing
    visible), as a connection logged in as `role` can: only the runtime role crosses by
    `SET ROLE` (the owner crosses by its own policy, a superuser by being one)."""
    if floor is None:
        return ""
    if isinstance(floor, Crossing):
        return f"SET LOCAL ROLE {CROSSING_ROLE}" if role == RUNTIME_ROLE else ""
    return (
        f"SELECT set_config('{READ_LANES}', {_literal(joined(floor.read))}, true), "
        f"set_config('{WRITE_LANES}', {_literal(joined(floor.write))}, true)"
    )


def begin(statement: str, floor: Floor | None, conn: Any) -> str:
    """`statement` (a BEGIN) and the settings of `floor`, as one simple query."""
    settings = settings_sql(floor, login_role(conn))
    return f"{statement}; {settings}" if settings else statement


def login_role(conn: Any) -> str | None:
    """The role `conn` logged in as (PostgreSQL reports it at the start)."""
    return getattr(conn.get_settings(), "session_authorization", None)


@lru_cache(maxsize=1024)
def gated(statement: str, arguments: int) -> str:
    """`statement` that first sets `edgeloom.read_lanes` to its argument `arguments + 1`.

    Outside a transaction a statement is one of its own, so the setting ends with it. The
    sub-select makes the set a one-time filter of the outermost node, evaluated before any
    table is read, and the policies read the setting after it (an InitPlan evaluated when
    first needed)."""
    return (
        f"SELECT * FROM ({statement}) floor_ "
        f"WHERE (SELECT set_config('{READ_LANES}', ${arguments + 1}, true)) IS NOT NULL"
    )


@asynccontextmanager
async def crossing(conn: Any) -> AsyncIterator[None]:
    """A transaction of the gateway's own work over every lane on `conn` (`CROSSING`):
    BEGIN and the role in one round trip; rolled back if the block raises."""
    await conn.execute(begin("BEGIN", CROSSING, conn))
    try:
        yield
    except BaseException:
        if not conn.is_closed():
            await conn.execute("ROLLBACK")
        raise
    await conn.execute("COMMIT")


async def on_core(conn: AsyncConnection, floor: Floor) -> None:
    """Give the transaction SQLAlchemy began on `conn` `floor`'s lanes (one statement
    more: the feed's replay and cursor checks, rare beside the reads above)."""
    driver = (await conn.get_raw_connection()).driver_connection
    settings = settings_sql(floor, login_role(driver))
    if settings:
        await conn.exec_driver_sql(settings)
