"""Vectors of every size a policy may declare, sent the documented way (as variables): a
1536-number vector to `ingest` and `search`, and a full `ingestMany` of 384-number vectors,
on the compiled path and through strawberry alike; the caps that remain refuse with their
names."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gql.api.limits import MAX_VECTOR_ITEMS, MAX_VECTOR_NUMBERS
from store.kinds.record.vectors import availability
from tests.conftest import GatewayFactory
from tests.gql._api import unique
from tests.support import Gateway, sql

POLICY = """
lanes:
  wide: { embedding: { dimensions: 1536, model: large } }
  small: { embedding: { dimensions: 384, model: small } }
agents:
  dev: { read: ["*"], write: ["*"] }
"""
INGEST = "mutation($input: IngestInput!) { ingest(input: $input) { id } }"
INGEST_MANY = "mutation($inputs: [IngestInput!]!) { ingestMany(inputs: $inputs) { id } }"
SEARCH = """
query($vector: [Float!], $lanes: [String!]) {
  search(vector: $vector, lanes: $lanes, first: 1) { items { record { id } } }
}
"""


@dataclass
class Pair:
    compiled: Gateway
    plain: Gateway
    off: str | None  # why the server cannot search by vector (None: it can)

    def served(self, path: str) -> Gateway:
        return self.compiled if path == "compiled" else self.plain


@pytest.fixture(scope="module")
async def pair(start_gateway: GatewayFactory) -> Pair:
    compiled = await start_gateway(policy_yaml=POLICY, anonymous_agent="dev")
    async with sql(compiled.database_url) as conn:
        off = await availability(conn)
    plain = await start_gateway(
        anonymous_agent="dev", database_url=compiled.database_url, compiled_path=False
    )
    return Pair(compiled, plain, off)


def vector(size: int, hot: int) -> list[float]:
    """`size` numbers, largest at `hot`."""
    return [1.0 if i == hot else 0.01 for i in range(size)]


@pytest.mark.parametrize("path", ["compiled", "plain"])
async def test_a_1536_number_vector_is_taken_as_a_variable(pair: Pair, path: str) -> None:
    gateway = pair.served(path)
    hot = 1000 + (path == "plain")
    given = vector(1536, hot)
    written = await gateway.data(
        INGEST, {"input": {"content": unique(), "lane": "wide", "embedding": given}}
    )
    if pair.off is not None:
        pytest.skip(f"written; a search by vector needs pgvector: {pair.off}")
    found = await gateway.data(SEARCH, {"vector": given, "lanes": ["wide"]})
    assert [i["record"]["id"] for i in found["search"]["items"]] == [written["ingest"]["id"]]


@pytest.mark.parametrize("path", ["compiled", "plain"])
async def test_a_full_ingest_many_of_384_number_vectors_is_taken(pair: Pair, path: str) -> None:
    gateway = pair.served(path)
    inputs = [
        {"content": unique(), "lane": "small", "embedding": vector(384, i % 384)}
        for i in range(1000)
    ]
    written = await gateway.data(INGEST_MANY, {"inputs": inputs})
    assert len(written["ingestMany"]) == 1000


async def test_the_vector_caps_refuse_naming_themselves(pair: Pair) -> None:
    gateway = pair.compiled
    response = await gateway.client.post(
        gateway.graphql_url,
        json={"query": SEARCH, "variables": {"vector": [0.5] * (MAX_VECTOR_ITEMS + 1)}},
    )
    assert response.status_code == 413
    assert response.json()["errors"][0]["extensions"]["maxVectorItems"] == MAX_VECTOR_ITEMS
    # A list of anything else holds at most 1000 items, as before.
    response = await gateway.client.post(
        gateway.graphql_url,
        json={"query": SEARCH, "variables": {"lanes": ["wide"] * 1001}},
    )
    assert response.status_code == 413
    inputs = [{"content": "x", "lane": "wide", "embedding": [0.5] * 1536} for _ in range(261)]
    response = await gateway.client.post(
        gateway.graphql_url, json={"query": INGEST_MANY, "variables": {"inputs": inputs}}
    )
    assert response.status_code == 413
    assert response.json()["errors"][0]["extensions"]["maxVectorNumbers"] == MAX_VECTOR_NUMBERS
