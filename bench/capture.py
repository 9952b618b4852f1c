"""The SQL the gateway executes for one call, recorded from a real in-process gateway.

A `Recorder` hears the gateway's asyncpg pool (reads and writes) through query
loggers on each of its connections: a statement outside a transaction is a unit of
its own (the compiled read path), and BEGIN ... ROLLBACK or COMMIT on one connection
is one unit (a read snapshot, a write). It also listens on SQLAlchemy's Engine class
for what still runs there (token lookups, the feed's catch-up). That is what the raw
client replays: same statements, same parameters, same transaction boundaries.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from bench.server import free_port
from gql.server.app import Settings, create_app
from store.kinds.policy.in_force import HEAD_SQL, VERSION_SQL


@dataclass
class Statement:
    sql: str
    params: Any  # a tuple, or for executemany a list of tuples
    many: bool


@dataclass
class Unit:
    """One checked-out connection: its statements, then COMMIT or (pool reset) ROLLBACK."""

    statements: list[Statement] = field(default_factory=list)
    commit: bool = False
    # False: the statements run as recorded, BEGIN and ROLLBACK included if any.
    transaction: bool = True


Trace = list[Unit]


def _is_policy_refresh(sql: str) -> bool:
    # The read-side policy check runs at most once a second per process
    # (policy_store.READ_TTL_SECONDS); the steady state does not execute it.
    return sql in (HEAD_SQL, VERSION_SQL)


class Recorder:
    def __init__(self) -> None:
        self._units: list[Unit] = []
        self._by_conn: dict[int, Unit] = {}
        self._active = False

    def install(self) -> None:
        event.listen(Engine, "engine_connect", self._connect)
        event.listen(Engine, "before_cursor_execute", self._execute)
        event.listen(Engine, "commit", self._commit)

    def remove(self) -> None:
        event.remove(Engine, "engine_connect", self._connect)
        event.remove(Engine, "before_cursor_execute", self._execute)
        event.remove(Engine, "commit", self._commit)

    def _connect(self, conn: Connection) -> None:
        unit = Unit()
        self._by_conn[id(conn)] = unit  # a new Connection object each checkout
        if self._active:
            self._units.append(unit)

    def _execute(
        self,
        conn: Connection,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        unit = self._by_conn.get(id(conn))
        if not self._active or unit is None or _is_policy_refresh(statement):
            return
        if executemany:
            params: Any = [tuple(p) for p in parameters]
        else:
            params = tuple(parameters or ())
        unit.statements.append(Statement(statement, params, executemany))

    def _commit(self, conn: Connection) -> None:
        unit = self._by_conn.get(id(conn))
        if unit is not None:
            unit.commit = True

    async def hear_pool(self, pool: Any) -> None:
        """Log every statement of the read pool, connection by connection."""
        held = [await pool.acquire() for _ in range(pool.get_max_size())]
        for n, conn in enumerate(held):
            conn.add_query_logger(lambda record, n=n: self._pool_query(n, record))
        for conn in held:
            await pool.release(conn)

    def _pool_query(self, conn: int, record: Any) -> None:
        if _is_policy_refresh(record.query):
            return
        key = -1 - conn  # apart from SQLAlchemy's connection ids
        text: str = record.query
        open_unit = self._by_conn.get(key)
        if text.startswith("BEGIN"):
            # Followed whether recording or not (as `_connect` does): a transaction begun
            # before recording is not the recorded call's, nor is any of its statements.
            open_unit = self._by_conn[key] = Unit(transaction=False)
            if self._active:
                self._units.append(open_unit)
        elif open_unit is None and not self._active:
            return
        statement = Statement(text, tuple(record.args or ()), False)
        if open_unit is None:
            self._units.append(Unit([statement], transaction=False))
            return
        open_unit.statements.append(statement)
        if text.startswith(("ROLLBACK", "COMMIT")):
            open_unit.commit = text.startswith("COMMIT")
            del self._by_conn[key]

    @contextlib.contextmanager
    def record(self) -> Iterator[Trace]:
        """Everything the gateway executes inside the block, as one trace."""
        self._units = []
        self._active = True
        trace: Trace = []
        try:
            yield trace
        finally:
            self._active = False
            trace.extend(u for u in self._units if u.statements)
            self._units = []


@contextlib.asynccontextmanager
async def capture_gateway(database_url: str) -> AsyncIterator[tuple[int, Recorder]]:
    """The same app `edgeloom serve` runs, in this process so its engine can be heard."""
    recorder = Recorder()
    recorder.install()
    port = free_port()
    # No checkpoints and no expiry sweep: a background transaction would mingle with the
    # calls recorded.
    settings = Settings(
        database_url=database_url,
        anonymous_agent="dev",
        pool_size=4,
        read_pool_size=4,
        checkpoint_seconds=0,
        expiry_seconds=0,
    )
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("capture gateway stopped during start-up")
            await asyncio.sleep(0.02)
        await recorder.hear_pool(server.lifespan.state["services"].pool)
        yield port, recorder
    finally:
        server.should_exit = True
        await task
        recorder.remove()
