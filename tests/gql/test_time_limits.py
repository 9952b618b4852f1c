"""Every operation has the time one request has, over every transport: a query or mutation
over the WebSocket is stopped and answered as over HTTP, an MCP tool call too, and each
statement on the gateway's connections is bounded by PostgreSQL's statement_timeout, so a
subscription's initial read stops there and none outlives its request.

A statement is made to wait past the limit the way one does in life: a table held by
another transaction's lock (here the test's own ACCESS EXCLUSIVE lock)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from gql.server.settings import STATEMENT_GRACE
from tests.conftest import DEV, GatewayFactory
from tests.gql._api import ingest, unique
from tests.gql._feed import feed_client
from tests.gql._mcp import over_http, refused
from tests.support import Gateway, sql

LIMIT = 1.0
OUTCOME = 0.5
# The longest a request lives (its time, then the wait for a commit's outcome), and a grace.
STATEMENT_MS = round((LIMIT + OUTCOME + STATEMENT_GRACE) * 1000)
RECORDS = "query { records(first: 5) { items { id content } } }"
WATCH = "subscription($match: [String!]!) { watch(match: $match, initial: true) { change } }"


@pytest.fixture(scope="module")
async def limited(start_gateway: GatewayFactory) -> Gateway:
    return await start_gateway(
        anonymous_agent=DEV, request_timeout=LIMIT, write_outcome_timeout=OUTCOME
    )


@asynccontextmanager
async def records_locked(gateway: Gateway) -> AsyncIterator[None]:
    """The records table locked by another transaction until the block ends."""
    async with sql(gateway.database_url) as conn:
        transaction = conn.transaction()
        await transaction.start()
        await conn.execute("LOCK TABLE records, edge_properties IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            await transaction.rollback()


async def test_every_statement_of_the_gateway_has_the_request_time(limited: Gateway) -> None:
    assert limited.state is not None
    shown = "SELECT setting::int FROM pg_settings WHERE name = 'statement_timeout'"
    async with limited.state["services"].pool.acquire() as conn:
        assert await conn.fetchval(shown) == STATEMENT_MS
        # And inside a transaction like a read's snapshot's.
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            assert await conn.fetchval(shown) == STATEMENT_MS


async def test_a_query_over_the_websocket_is_stopped_at_the_time_limit(limited: Gateway) -> None:
    await ingest(limited, "one")
    async with feed_client(limited) as client, records_locked(limited):
        started = time.monotonic()
        await client.subscribe("q", RECORDS)
        error = await client.error("q", timeout=10)
        took = time.monotonic() - started
    assert error["extensions"]["code"] == "TIMEOUT", error
    assert error["extensions"]["timeoutSeconds"] == LIMIT
    assert error["message"].startswith(f"the request was stopped after {LIMIT:g} seconds")
    assert took < LIMIT + 5, took
    # The socket's next operation is answered as usual.
    async with feed_client(limited) as client:
        await client.subscribe("again", RECORDS)
        answer = await client.message("again")
        assert answer["type"] == "next" and "errors" not in answer["payload"], answer


async def test_a_subscriptions_initial_read_is_stopped_by_postgresql(limited: Gateway) -> None:
    tag = f"t:{unique()}"
    await ingest(limited, "member", [tag])
    async with feed_client(limited) as client, records_locked(limited):
        await client.subscribe("w", WATCH, match=[tag])
        message = await client.message("w", timeout=30)
    # No timer of the gateway's stops a subscription: PostgreSQL cancelled its statement
    # (statement_timeout), and the client is told which limit it ran into.
    errors = message["payload"] if message["type"] == "error" else message["payload"]["errors"]
    assert errors[0]["extensions"]["code"] == "TIMEOUT", message
    assert "statement_timeout" in errors[0]["message"]


async def test_an_mcp_tool_call_is_stopped_at_the_time_limit(limited: Gateway) -> None:
    record = await ingest(limited, "read me")
    async with over_http(limited) as session, records_locked(limited):
        started = time.monotonic()
        error = await refused(session, "e_read", id=record["id"])
        took = time.monotonic() - started
    assert error["code"] == "TIMEOUT", error
    assert took < LIMIT + 5, took
