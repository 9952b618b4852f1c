"""One authorisation for every transport, and a session that needs none of them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gql.api.auth import BAD_SCHEME, BAD_TOKEN, NO_TOKEN, authorize
from gql.api.session import Caller, Services, Session, UnauthenticatedError
from store.database import create_engine
from store.kinds.policy.in_force import PolicyCache
from store.kinds.record import queries
from store.ledger.executor import Executor
from store.pool import create_pool
from tests.conftest import GatewayFactory
from tests.gql._policy_support import ingest, mint

TRANSPORTS = ("strawberry", "starlette", "graphql", "cross_web", "uvicorn")


def test_the_session_and_the_authorisation_import_no_transport() -> None:
    # A fresh interpreter: what these modules pull in, and nothing the tests loaded.
    code = (
        "import sys, gql.api.auth, gql.api.session\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({TRANSPORTS!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


async def test_authorize_decides_a_bearer_token_as_every_transport_does(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(policy_yaml=crm_yaml)
    minted = await mint(gateway, "sales", "stranger")
    written = await ingest(
        gateway, minted["sales"], content="call", lane="crm", sourceType="meeting"
    )
    engine = create_engine(gateway.database_url, pool_size=1)
    pool = await create_pool(gateway.database_url, 2)
    cache = PolicyCache.empty()
    services = Services(engine, pool, Executor(pool, cache), cache)
    try:
        caller = await authorize(f"Bearer {minted['sales']}", services, None)
        assert caller == Caller(agent="sales")
        assert await authorize(None, services, None) == Caller(agent=None, problem=NO_TOKEN)
        assert await authorize(None, services, "sales") == Caller(agent="sales")
        assert await authorize("Basic x", services, None) == Caller(None, BAD_SCHEME)
        assert await authorize("Bearer nope", services, None) == Caller(None, BAD_TOKEN)
        # A live token of an agent the policy does not declare is refused all the same.
        stranger = await authorize(f"bearer  {minted['stranger']} ", services, None)
        assert stranger.agent is None
        assert stranger.problem is not None and "'stranger' is not declared" in stranger.problem
        assert stranger.details == {"agent": "stranger"}

        # What a transport does with the caller: reads in one snapshot, under its rights.
        session = Session(services, caller)
        assert await session.readable_lanes() == ["crm"]
        async with session.read() as (reader, lanes):
            found = await queries.records_by_id(reader, [written["id"]], lanes)
        assert [r.state.content for r in found.values()] == ["call"]
        await session.end_reads()
        with pytest.raises(UnauthenticatedError, match="'stranger' is not declared"):
            await Session(services, stranger).readable_lanes()
    finally:
        await pool.close()
        await engine.dispose()
