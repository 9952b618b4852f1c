"""`edgeloom mcp`: the tools over stdio, as one agent (a bearer token from --token or
EDGELOOM_TOKEN), on the same services a gateway process opens."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from mcp.server.mcpserver import Context

from gql.api.auth import NO_TOKEN
from gql.api.session import Services, Session
from gql.mcp.run import Refused, caller_session
from gql.mcp.server import build_server
from gql.server.policy_startup import development_lineage, ensure_policy, note_vector_search
from gql.server.settings import DEFAULT_REQUEST_TIMEOUT, Settings
from store.database import create_engine
from store.kinds.policy.in_force import PolicyCache
from store.ledger.executor import Executor
from store.operations.migrate import migrate
from store.operations.roles import serving_url
from store.pool import create_pool

DEV_AGENT = "dev"
NO_STDIO_TOKEN = (
    "edgeloom mcp needs a bearer token: pass --token T or set EDGELOOM_TOKEN; "
    "an operator mints one with 'edgeloom token create --agent NAME'"
)


class StdioGate:
    """Every call is the one agent whose token started the process (checked again at
    each call, so a revoked token is refused at once); without a token, the development
    agent while a gateway started without a policy file would serve it without one
    (`development_lineage`), as on a loopback gateway."""

    time_limit = DEFAULT_REQUEST_TIMEOUT

    def __init__(self, services: Services, token: str | None) -> None:
        self.services = services
        self.authorization = None if token is None else f"Bearer {token}"

    async def session(self, ctx: Context[Any, Any]) -> Session:
        anonymous = None
        if self.authorization is None:
            async with self.services.pool.acquire() as conn:
                anonymous = DEV_AGENT if await development_lineage(conn) else None
        try:
            return await caller_session(self.services, self.authorization, anonymous)
        except Refused as refused:
            if refused.message == NO_TOKEN:
                raise Refused(NO_STDIO_TOKEN, refused.code, refused.details) from None
            raise


async def serve_stdio(database_url: str, token: str | None, runtime_url: str | None) -> None:
    """Migrate, settle the policy as a development gateway would, then serve until stdin
    closes. Nothing but the protocol is written to stdout."""
    with contextlib.redirect_stdout(sys.stderr):
        owner = create_engine(database_url, pool_size=1)
        try:
            await migrate(owner)
        finally:
            await owner.dispose()
        url = await serving_url(database_url, runtime_url)
        engine = create_engine(url, pool_size=2)
        # Its tool calls are requests like the gateway's: the same time limits.
        pool = await create_pool(url, 2, Settings(database_url=url).statement_timeout)
    try:
        cache = PolicyCache.empty()
        executor = Executor(pool, cache)
        settings = Settings(database_url=database_url, anonymous_agent=DEV_AGENT)
        version = await ensure_policy(executor, settings)
        vectors_off = await note_vector_search(pool, version)
        services = Services(
            engine=engine, pool=pool, executor=executor, policies=cache, vectors_off=vectors_off
        )
        try:
            await build_server(StdioGate(services, token)).run_stdio_async()
        finally:
            await executor.upkeep.finish()
    finally:
        await pool.close()
        await engine.dispose()
