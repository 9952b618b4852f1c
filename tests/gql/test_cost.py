"""Nested lists are counted before they run, and refused over the limit."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from gql.cost import DEFAULT_MAX_COST
from tests.gql._api import INGEST_MANY, unique
from tests.support import Gateway, sql

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


async def member_reads_since(conn: asyncpg.Connection, since: datetime) -> int:
    """How many of the gateway's connections started reading edge properties after `since`."""
    count: int = await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND application_name = 'edgeloom' AND query_start > $1 "
        "AND query ILIKE '%edge_properties%'",
        since,
    )
    return count


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
    assert (await gateway.data(PAGE, {"n": 100}))["records"] is not None
    error = await gateway.error(PAGE, {"n": 500})
    assert error["extensions"]["cost"] == 1 + 500 * (1 + 256)
    # without first, a page counts its default size of 50
    assert (await gateway.data(PAGE, {"n": None}))["records"] is not None
