"""Statements per request on the read pool: one for a compiled read, a few otherwise."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from store.kinds.policy.in_force import HEAD_SQL
from tests.conftest import GatewayFactory
from tests.gql._api import GATHER, RECORD, ingest, unique
from tests.gql._edges import CONFLICTS, EDGES, RELATED, upsert
from tests.support import Gateway, pool_statements

RECORDS = """
query($first: Int) { records(first: $first) { totalCount items { id content properties }
  pageInfo { hasNextPage endCursor } } }
"""
RECORDS_PAGE = "{ records(first: 5) { items { id content } pageInfo { endCursor } } }"
NESTED = """
query($id: ID!) { record(id: $id) { id edgeProperties { property memberCount
  members(first: 3) { totalCount items { id versions { number } } } } } }
"""
# Its memberCount is the count the read found, not a second read of it.
EDGE_PROPERTY = """
query($property: String!) { edgeProperty(property: $property) { property memberCount } }
"""


@pytest.fixture(scope="module")
async def data(start_gateway: GatewayFactory) -> tuple[Gateway, Gateway, dict[str, Any]]:
    compiled = await start_gateway(anonymous_agent="dev")
    plain = await start_gateway(
        anonymous_agent="dev", database_url=compiled.database_url, compiled_path=False
    )
    tag = f"org:{unique('rt')}"
    ids = [(await ingest(compiled, f"rt {n}", [tag, f"topic:t{n % 2}"]))["id"] for n in range(4)]
    for n in range(3):
        await upsert(compiled, fromId=ids[n], toId=ids[n + 1], type="supports", evidence={"n": n})
    await upsert(compiled, fromId=ids[3], toId=ids[0], type="contradicts")
    variables = {"id": ids[0], "match": [tag, "topic:t0"], "first": 2, "property": tag}
    return compiled, plain, variables


async def count(gateway: Gateway, query: str, variables: dict[str, Any]) -> int:
    await gateway.data(query, variables)  # prepared, cached, policy read: warm
    async with pool_statements(gateway) as seen:
        await gateway.data(query, variables)
        await asyncio.sleep(0)
    # The policy head is re-read at most once a second whatever the request: on a
    # loaded machine that second can end between the warm call and this one.
    return len([entry for entry in seen if entry.query != HEAD_SQL])


@pytest.mark.parametrize(
    ("name", "query"),
    [
        ("record", RECORD),
        ("gather", GATHER),
        ("records", RECORDS),
        ("page", RECORDS_PAGE),
        ("edges", EDGES),
        ("related", RELATED),
        ("conflicts", CONFLICTS),
        ("edgeProperty", EDGE_PROPERTY),
    ],
)
async def test_a_compiled_read_is_one_statement(
    data: tuple[Gateway, Gateway, dict[str, Any]], name: str, query: str
) -> None:
    compiled, _, variables = data
    assert await count(compiled, query, variables) == 1


async def test_nested_pages_and_versions_are_still_one_statement(
    data: tuple[Gateway, Gateway, dict[str, Any]],
) -> None:
    compiled, _, variables = data
    assert await count(compiled, NESTED, variables) == 1


@pytest.mark.parametrize(
    ("query", "most"),
    # BEGIN, the statements, ROLLBACK: one snapshot, a fixed number whatever the data;
    # nested members pages are one statement each (two edge properties here).
    [
        (RECORD, 4),
        (GATHER, 4),
        (RECORDS, 4),
        (NESTED, 11),
        (EDGES, 4),
        (RELATED, 8),
        (CONFLICTS, 6),
        (EDGE_PROPERTY, 3),
    ],
)
async def test_the_ordinary_path_stays_within_a_few_statements(
    data: tuple[Gateway, Gateway, dict[str, Any]], query: str, most: int
) -> None:
    _, plain, variables = data
    assert await count(plain, query, variables) <= most
