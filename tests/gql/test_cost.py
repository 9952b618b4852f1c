"""Nested lists are counted before they run; a request stops when its client leaves or times out."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import asyncpg
import httpx
import pytest

from gql.api.cost import DEFAULT_MAX_COST
from tests.conftest import GatewayFactory
from tests.gql._api import INGEST_MANY, unique
from tests.support import Gateway, no_request_id, sql

NESTED = """
query($id: ID!, $n: Int) {
  record(id: $id) {
    edgeProperties { members(first: $n) { items {
      edgeProperties { members(first: $n) { items {
        edgeProperties { members(first: $n) { items { id } } }
      } } }
    } } }
  }
}
"""
ONE_LEVEL = """
query($id: ID!) { record(id: $id) { edgeProperties { members(first: 5) { items { id } } } } }
"""
PAGE = "query($n: Int) { records(first: $n) { items { id edgeProperties { id } } } }"


async def seed(gateway: Gateway, records: int) -> str:
    """`records` records sharing three edge properties; the id of the first."""
    tags = [unique("t:") for _ in range(3)]
    inputs = [{"content": f"r{n}", "properties": tags} for n in range(records)]
    data = await gateway.data(INGEST_MANY, {"inputs": inputs})
    first: str = data["ingestMany"][0]["id"]
    return first


async def gateway_backends(conn: asyncpg.Connection) -> dict[int, Any]:
    """Each of the gateway's connections: when its last statement started, and its text."""
    rows = await conn.fetch(
        "SELECT pid, query_start, query FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND application_name = 'edgeloom'"
    )
    return {row["pid"]: (row["query_start"], row["query"]) for row in rows}


async def test_nested_lists_over_the_limit_are_refused_before_any_sql(gateway: Gateway) -> None:
    record_id = await seed(gateway, 3)
    async with sql(gateway.database_url) as conn:
        await gateway.data("{ labels { label } }")  # the policy is read and cached now
        before = await gateway_backends(conn)
        body = await gateway.post(NESTED, {"id": record_id, "n": 500})
        after = await gateway_backends(conn)
    [error] = body["errors"]
    assert body.get("data") is None, body
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    cost = error["extensions"]["cost"]
    assert cost > 500**3
    assert error["extensions"]["limit"] == DEFAULT_MAX_COST
    assert f"{cost:,} objects, over the limit of {DEFAULT_MAX_COST:,}" in error["message"]
    assert "first:" in error["message"]
    # Nothing but the policy head (read to decide who may call) ran for it.
    ran = [query for pid, (start, query) in after.items() if before.get(pid, (None,))[0] != start]
    assert all("policy_head" in query for query in ran), ran


async def test_a_query_within_the_limit_runs(gateway: Gateway) -> None:
    record_id = await seed(gateway, 3)
    data = await gateway.data(ONE_LEVEL, {"id": record_id})
    assert [len(p["members"]["items"]) for p in data["record"]["edgeProperties"]] == [3, 3, 3]


async def test_the_cost_counts_first_from_the_variables(gateway: Gateway) -> None:
    await seed(gateway, 120)
    # Twice: the compiled path keeps each size's verdict, and keeps them apart.
    for _ in range(2):
        assert len((await gateway.data(PAGE, {"n": 100}))["records"]["items"]) == 100
        error = await gateway.error(PAGE, {"n": 500})
        assert error["extensions"]["cost"] == 1 + 500 * (1 + 256)
    # without first, a page counts its default size of 50
    assert len((await gateway.data(PAGE, {"n": None}))["records"]["items"]) == 50


async def test_a_lower_limit_is_a_setting(start_gateway: GatewayFactory) -> None:
    small = await start_gateway(anonymous_agent="dev", max_query_cost=100)
    error = await small.error(PAGE, {"n": 1})
    assert error["extensions"] == {
        "code": "BAD_USER_INPUT",
        "cost": 258,
        "limit": 100,
    }
    assert (await small.data("{ records(first: 99) { totalCount items { id } } }"))["records"]
    # A document without Int variables costs the same on every request: the compiled
    # path checks it once, and one over the limit stays refused.
    literal = "{ records(first: 2) { items { id edgeProperties { id } } } }"
    for _ in range(2):
        assert (await small.error(literal))["extensions"]["cost"] == 1 + 2 * (1 + 256)
    for _ in range(2):
        assert (await small.data("{ records(first: 99) { items { id } } }"))["records"]


# A read that waits for the lock on `records` a test holds: slow for as long as the test
# wants, and easy to find in pg_stat_activity while it waits.
READ = "{ records(first: 5) { items { id } } }"


async def blocked_read(conn: asyncpg.Connection) -> tuple[int, datetime] | None:
    """The gateway's backend running a statement that waits for a lock on `records`."""
    row = await conn.fetchrow(
        "SELECT pid, query_start FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name = 'edgeloom' "
        "AND state = 'active' AND wait_event_type = 'Lock' AND query ILIKE '%records%'"
    )
    return None if row is None else (row["pid"], row["query_start"])


async def still_running(conn: asyncpg.Connection, pid: int, started: datetime) -> bool:
    """Whether backend `pid` is still running the statement it started at `started`."""
    running: bool = await conn.fetchval(
        "SELECT count(*) > 0 FROM pg_stat_activity "
        "WHERE pid = $1 AND state = 'active' AND query_start = $2",
        pid,
        started,
    )
    return running


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "ordinary"])
@pytest.mark.parametrize("ends", ["client leaves", "time runs out"])
async def test_a_stopped_request_stops_its_statement_on_the_server(
    start_gateway: GatewayFactory, compiled: bool, ends: str
) -> None:
    gateway = await start_gateway(
        anonymous_agent="dev", compiled_path=compiled, request_timeout=1.5
    )
    await seed(gateway, 3)
    path = gateway.app.view.compiled
    assert (await gateway.data(READ))["records"]["items"]  # the policy is read and cached now
    assert (path is not None and path.answered == 2) is compiled  # the seed and this read
    async with sql(gateway.database_url) as holder, sql(gateway.database_url) as watcher:
        holder_tx = holder.transaction()
        await holder_tx.start()
        await holder.execute("LOCK TABLE records IN ACCESS EXCLUSIVE MODE")
        async with httpx.AsyncClient(timeout=10) as client:
            call = asyncio.create_task(client.post(gateway.graphql_url, json={"query": READ}))
            deadline = time.monotonic() + 10
            while (blocked := await blocked_read(watcher)) is None:
                assert not call.done(), call.result().text[:300]
                assert time.monotonic() < deadline, "the read never reached the server"
                await asyncio.sleep(0.02)
            pid, started = blocked
            if ends == "client leaves":
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
            else:
                response = await call
                assert response.status_code == 503, response.text
        # The lock is still held: only a cancel on the server ends the statement.
        deadline = time.monotonic() + 3
        while await still_running(watcher, pid, started):
            assert time.monotonic() < deadline, "the statement still runs on the server"
            await asyncio.sleep(0.02)
        await holder_tx.rollback()
    # Its connection came back usable or was replaced: every connection serves again.
    for _ in range(6):
        assert (await gateway.data(READ))["records"]["items"]
    assert (await gateway.client.get(gateway.url + "/healthz")).status_code == 200


async def test_a_request_over_its_time_is_stopped_and_answered(
    start_gateway: GatewayFactory,
) -> None:
    slow = await start_gateway(anonymous_agent="dev", max_query_cost=10**15, request_timeout=2)
    record_id = await seed(slow, 40)
    response = await slow.client.post(
        slow.graphql_url, json={"query": NESTED, "variables": {"id": record_id, "n": 40}}
    )
    assert response.status_code == 503
    [error] = response.json()["errors"]
    assert no_request_id(error)["extensions"] == {
        "code": "TIMEOUT",
        "timeoutSeconds": 2,
        "completedWrites": 0,
    }
    assert error["message"].startswith("the request was stopped after 2 seconds")
