"""Fixtures shared by the whole suite: one PostgreSQL, fresh databases, live gateways."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from importlib.resources import files
from pathlib import Path

import pytest

from gql.settings import Settings
from tests.support import Databases, Gateway, admin_url, assert_verified, run_gateway

DEV = "dev"

# Every edgeloom process the suite starts signs checkpoints with a key of this run's
# own, never with a key an operator keeps beside a real data folder.
os.environ["EDGELOOM_CHECKPOINT_KEY"] = str(
    Path(tempfile.mkdtemp(prefix="edgeloom-test-key-")) / "checkpoint-key.pem"
)


@pytest.fixture(scope="session")
async def databases() -> AsyncIterator[Databases]:
    # Not under pytest's basetemp: another pytest run on the machine rotates those
    # folders away, and the embedded server's data must outlive nothing but this run.
    data_dir = Path(tempfile.mkdtemp(prefix="edgeloom-test-pg-"))
    url, server = admin_url(data_dir)
    dbs = Databases(url)
    await dbs.setup()
    try:
        yield dbs
    finally:
        await dbs.drop_all()
        if server is not None:
            server.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


GatewayFactory = Callable[..., Awaitable[Gateway]]


@pytest.fixture(scope="module")
async def start_gateway(databases: Databases) -> AsyncIterator[GatewayFactory]:
    """Starts gateways on fresh databases; at the end each ledger must verify."""
    async with AsyncExitStack() as stack:
        started: list[Gateway] = []

        async def start(
            policy_yaml: str | None = None,
            anonymous_agent: str | None = None,
            database_url: str | None = None,
            **settings: object,
        ) -> Gateway:
            url = database_url or await databases.create()
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
