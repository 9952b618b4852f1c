"""Fixtures shared by the whole suite: one PostgreSQL, fresh databases, live gateways."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from _pytest.terminal import TerminalReporter

from gql.server.settings import Settings
from tests.support import (
    Databases,
    Gateway,
    admin_url,
    assert_verified,
    connections_to,
    run_gateway,
)

DEV = "dev"

# Every edgeloom process the suite starts signs checkpoints with a key of this run's
# own, never with a key an operator keeps beside a real data folder.
os.environ["EDGELOOM_CHECKPOINT_KEY"] = str(
    Path(tempfile.mkdtemp(prefix="edgeloom-test-key-")) / "checkpoint-key.pem"
)

# A test whose call takes longer than this is marked `over10s` with its reason; one that
# is not is named at the end of the run, so the next slow test shows the day it lands.
SLOW_CALL_S = 10.0
_unmarked_slow: list[tuple[str, float]] = []


# The files whose tests reach the suite's PostgreSQL (their closure holds `databases`):
# each must leave no connection open to the databases it made (_no_connections_left).
_database_files: set[Path] = set()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    long_files: set[Path] = set()
    for item in items:
        fixtures = getattr(item, "fixturenames", [])
        if "databases" in fixtures:
            _database_files.add(item.path)
        if "start_gateway" in fixtures:
            # Before the test's own fixtures (stopped after them), after the wider ones,
            # which must not start their gateways on the test's stack.
            defs = item._fixtureinfo.name2fixturedefs  # type: ignore[attr-defined]
            narrow = (n for n, name in enumerate(fixtures) if _scope(defs, name) == "function")
            fixtures.insert(next(narrow, len(fixtures)), "_test_gateways")
        mark = item.get_closest_marker("over10s")
        if mark is None:
            continue
        if not (mark.args and isinstance(mark.args[0], str)):
            raise pytest.UsageError(f"{item.nodeid}: over10s needs its reason, over10s('...')")
        long_files.add(item.path)
    # The files with long tests go first, so that scripts/test's workers (each takes whole
    # files) do not end with one of them still running a long file while the other waits.
    items.sort(key=lambda item: item.path not in long_files)


def _scope(defs: dict[str, Any], name: str) -> str | None:
    return defs[name][-1].scope if defs.get(name) else None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under pytest-xdist the reports reach the controller too, with their keywords.
    if report.when == "call" and report.duration > SLOW_CALL_S and "over10s" not in report.keywords:
        _unmarked_slow.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    if _unmarked_slow and not hasattr(terminalreporter.config, "workerinput"):
        terminalreporter.section(f"calls over {SLOW_CALL_S:.0f} s without an over10s mark")
        for nodeid, seconds in sorted(_unmarked_slow, key=lambda s: -s[1]):
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}")


@pytest.fixture(scope="session")
async def databases() -> AsyncIterator[Databases]:
    # Not under pytest's basetemp: another pytest run on the machine rotates those
    # folders away, and the embedded server's data must outlive nothing but this run.
    data_dir = Path(tempfile.mkdtemp(prefix="edgeloom-test-pg-"))
    url, server = admin_url(data_dir)
    dbs = Databases(url)
    await dbs.setup()
    _session_databases.append(dbs)
    try:
        yield dbs
    finally:
        # The embedded server's databases go with its folder; dropped one by one, each
        # would wait for a checkpoint (half a minute at the end of a run).
        if server is None:
            await dbs.drop_all()
        else:
            server.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


# How long the connections of a stopped gateway or process may take to end on the server.
CONNECTIONS_END_S = 15.0
# The session's Databases once a test has asked for them. _no_connections_left reads it here
# rather than asking for the fixture: a session fixture first set up from inside a module
# fixture's running event loop cannot start its own (a file run alone).
_session_databases: list[Databases] = []


@pytest.fixture(scope="module", autouse=True)
async def _no_connections_left(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Fails the file that leaves a connection open to a database it made: leaked pools add
    up over a run, and on a shared server (DATABASE_URL) they reach its max_connections."""
    if request.path not in _database_files:
        yield
        return
    before = len(_session_databases[0].created) if _session_databases else 0
    yield
    if not _session_databases:
        return
    databases = _session_databases[0]
    made = databases.created[before:]
    left = await connections_to(databases.url, made, CONNECTIONS_END_S)
    assert not left, f"connections still open after {request.path.name}: {left}"


GatewayFactory = Callable[..., Awaitable[Gateway]]

# The stack of the test running now (tests run one at a time in a process): a gateway
# started inside a test body stops at that test's end, so a file's gateways do not all stay
# open until the file ends. Module fixtures are set up before it is set, and so live longer.
_test_stack: list[AsyncExitStack] = []


@pytest.fixture
async def _test_gateways() -> AsyncIterator[None]:
    async with AsyncExitStack() as stack:
        _test_stack.append(stack)
        try:
            yield
        finally:
            _test_stack.remove(stack)


@pytest.fixture(scope="module")
async def start_gateway(databases: Databases) -> AsyncIterator[GatewayFactory]:
    """Starts gateways on fresh databases: one started by a module's fixture lives until
    the module ends, one started in a test (or its own fixtures) until that test ends. At
    the end each ledger must verify."""
    async with AsyncExitStack() as module_stack:
        started: list[Gateway] = []

        async def start(
            policy_yaml: str | None = None,
            anonymous_agent: str | None = None,
            database_url: str | None = None,
            **settings: object,
        ) -> Gateway:
            url = database_url or await databases.create()
            stack = _test_stack[-1] if _test_stack else module_stack
            gateway = await stack.enter_async_context(
                run_gateway(
                    Settings(
                        database_url=url,
                        policy_yaml=policy_yaml,
                        anonymous_agent=anonymous_agent,
                        pool_size=4,
                        read_pool_size=4,
                        **settings,  # type: ignore[arg-type]
                    )
                )
            )
            started.append(gateway)
            return gateway

        yield start
    for gateway in started:
        await assert_verified(gateway.database_url)


@pytest.fixture(scope="module")
async def gateway(start_gateway: GatewayFactory) -> Gateway:
    """A development gateway (open lane 'default', agent 'dev' without a token)."""
    return await start_gateway(anonymous_agent=DEV)


@pytest.fixture(scope="session")
def crm_yaml() -> str:
    return files("policies").joinpath("examples/crm.yaml").read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def repo() -> Path:
    return Path(__file__).resolve().parent.parent
