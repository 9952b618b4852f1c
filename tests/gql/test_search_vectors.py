"""Search by vector over GraphQL and MCP: the compiled path and the resolvers answer alike,
a vector of another size is refused naming the size and model, and where the server has
no pgvector the gateway says so once at start and refuses a vector with that reason.
(What a vector search finds is tested at the store: tests/store/test_search_vectors.py.)"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest

from store.kinds.record.vectors import availability
from tests.conftest import GatewayFactory
from tests.gql._api import ingest, unique
from tests.gql._differential import compiled_path
from tests.gql._mcp import call, over_http, refused
from tests.support import Gateway, sql

POLICY = """
lanes:
  notes: { embedding: { dimensions: 3, model: m3 } }
  wide: { embedding: { dimensions: 5, model: m5 } }
agents:
  dev: { read: ["*"], write: ["*"] }
"""
SEARCH = """
query($text: String, $vector: [Float!], $match: [String!], $lanes: [String!], $first: Int,
      $after: String) {
  search(text: $text, vector: $vector, match: $match, lanes: $lanes, first: $first,
         after: $after) {
    totalCount totalCountExact
    items {
      score textRank vectorRank
      highlights { text start end }
      record { id content version properties }
    }
    pageInfo { hasNextPage endCursor }
  }
}
"""


@dataclass
class Pair:
    compiled: Gateway
    plain: Gateway
    off: str | None


@pytest.fixture(scope="module")
async def pair(start_gateway: GatewayFactory) -> Pair:
    compiled = await start_gateway(policy_yaml=POLICY, anonymous_agent="dev")
    plain = await start_gateway(
        anonymous_agent="dev", database_url=compiled.database_url, compiled_path=False
    )
    async with sql(compiled.database_url) as conn:
        off = await availability(conn)
    return Pair(compiled, plain, off)


async def both(pair: Pair, variables: dict[str, Any]) -> dict[str, Any]:
    """The answer, the same from both paths; the compiled path must have answered."""
    path = compiled_path(pair.compiled)
    before = path.answered
    got = await pair.compiled.data(SEARCH, variables)
    assert path.answered == before + 1
    expected = await pair.plain.data(SEARCH, variables)
    assert json.dumps(got) == json.dumps(expected)
    return got["search"]


async def test_both_paths_answer_vector_and_hybrid_searches_alike(pair: Pair) -> None:
    if pair.off is not None:
        pytest.skip("the server has no pgvector: tested by the refusal test")
    tag, word = f"t:{unique()}", unique("w")
    near = await ingest(pair.compiled, f"{word} a", [tag], lane="notes", embedding=[1, 0, 0])
    far = await ingest(pair.compiled, "b", [tag], lane="notes", embedding=[0, 1, 0])
    words = await ingest(pair.compiled, f"{word} c", [tag], lane="notes")

    found = await both(pair, {"vector": [1, 0.2, 0], "match": [tag]})
    assert [i["record"]["id"] for i in found["items"]] == [near["id"], far["id"]]
    assert [i["vectorRank"] for i in found["items"]] == [1, 2]
    assert [i["textRank"] for i in found["items"]] == [None, None]
    assert (found["totalCount"], found["totalCountExact"]) == (2, True)

    fused = await both(pair, {"vector": [1, 0.2, 0], "text": word, "match": [tag]})
    ranks = {i["record"]["id"]: (i["textRank"], i["vectorRank"]) for i in fused["items"]}
    assert ranks[near["id"]][1] == 1 and ranks[far["id"]] == (None, 2)
    assert ranks[words["id"]][1] is None and ranks[near["id"]][0] is not None
    assert fused["items"][0]["record"]["id"] == near["id"]

    page = await both(pair, {"vector": [1, 0.2, 0], "match": [tag], "first": 1})
    rest = await both(
        pair, {"vector": [1, 0.2, 0], "match": [tag], "after": page["pageInfo"]["endCursor"]}
    )
    assert [i["vectorRank"] for i in page["items"] + rest["items"]] == [1, 2]


async def test_a_vector_of_another_size_is_refused_naming_size_and_model(pair: Pair) -> None:
    if pair.off is not None:
        pytest.skip("the server has no pgvector: tested by the refusal test")
    for gateway in (pair.compiled, pair.plain):
        error = await gateway.error(SEARCH, {"vector": [1, 0], "lanes": ["notes"]})
        assert error["extensions"]["code"] == "BAD_USER_INPUT", error
        assert "a vector of 2 numbers fits none" in error["message"]
        assert "notes: 3 dimensions, model 'm3'" in error["message"]
    # Lanes of another size are left out of the vector list, not refused.
    wide = await ingest(pair.compiled, "wide", lane="wide", embedding=[0, 0, 0, 0, 1])
    found = await both(pair, {"vector": [0, 0, 0, 0, 1]})
    assert [i["record"]["id"] for i in found["items"]] == [wide["id"]]


async def test_e_search_takes_a_vector(pair: Pair) -> None:
    tag = f"t:{unique()}"
    record = await ingest(pair.compiled, "mcp", [tag], lane="notes", embedding=[0, 0, 1])
    async with over_http(pair.compiled) as session:
        if pair.off is not None:
            told = await refused(session, "e_search", vector=[0, 0, 1])
            assert told["code"] == "BAD_USER_INPUT" and "pgvector" in told["error"]
            return
        found = await call(session, "e_search", vector=[0, 0, 1], match=[tag])
        [hit] = found["items"]
        assert hit["id"] == record["id"] and hit["vector_rank"] == 1 and hit["matched"] == []


async def test_without_pgvector_the_start_says_so_and_a_vector_is_refused(
    start_gateway: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="edgeloom"):
        gateway = await start_gateway(policy_yaml=POLICY, anonymous_agent="dev")
    async with sql(gateway.database_url) as conn:
        off = await availability(conn)
    said = [r.getMessage() for r in caplog.records if "vector search is off" in r.getMessage()]
    if off is None:
        assert said == []
        pytest.skip("the server has pgvector")
    assert said == [off]
    for variables in ({"vector": [1, 0, 0]}, {"vector": [1, 0, 0], "text": "x"}):
        error = await gateway.error(SEARCH, variables)
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert error["message"] == off
    # Everything else works: the vector is written with its record, text search finds it.
    record = await ingest(gateway, unique("k"), lane="notes", embedding=[1, 0, 0])
    found = (await gateway.data(SEARCH, {"text": record["content"]}))["search"]
    assert [i["record"]["id"] for i in found["items"]] == [record["id"]]


async def test_a_stored_vector_past_float32_breaks_no_search_on_any_path(pair: Pair) -> None:
    # One stored before lengths were checked made every search of its lane an internal
    # error (its NaN score reached the JSON), for every reader and over MCP.
    if pair.off is not None:
        pytest.skip("the server has no pgvector: tested by the refusal test")
    tag = f"t:{unique()}"
    bad = await ingest(pair.compiled, "huge", [tag], lane="notes", embedding=[1, 1, 1])
    good = await ingest(pair.compiled, "fine", [tag], lane="notes", embedding=[1, 1, 0])
    async with sql(pair.compiled.database_url) as conn:
        await conn.execute(
            "UPDATE record_vectors SET embedding = '[3e38,3e38,3e38]' WHERE record_id = $1",
            bad["id"],
        )
        try:
            for variables in ({"vector": [1, 1, 1], "match": [tag]}, {"vector": [1, 1, 1]}):
                found = await both(pair, {**variables, "lanes": ["notes"], "first": 100})
                got = [i["record"]["id"] for i in found["items"]]
                assert good["id"] in got and bad["id"] not in got
            async with over_http(pair.compiled) as session:
                hits = (await call(session, "e_search", vector=[1, 1, 1], match=[tag]))["items"]
                assert [h["id"] for h in hits] == [good["id"]]
        finally:
            await conn.execute(
                "UPDATE record_vectors SET embedding = '[1,1,1]' WHERE record_id = $1", bad["id"]
            )
