"""Search over GraphQL: the compiled path and the resolvers answer alike, and bad input
is refused naming the problem. (What search finds is tested at the store: tests/store.)"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import GatewayFactory
from tests.gql._api import UPDATE, ingest, unique
from tests.gql._differential import compiled_path
from tests.gql._mcp import call, over_http, refused
from tests.support import Gateway

# The strict syntax unless a test says otherwise: these tests were written for it.
SEARCH = """
query($text: String, $match: [String!], $asOf: DateTime, $first: Int, $after: String,
      $syntax: SearchSyntax = STRICT) {
  search(text: $text, match: $match, asOf: $asOf, first: $first, after: $after,
         syntax: $syntax) {
    totalCount totalCountExact terms dropped hint
    items {
      score textRank vectorRank matchedTerms
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


@pytest.fixture(scope="module")
async def pair(start_gateway: GatewayFactory) -> Pair:
    compiled = await start_gateway(anonymous_agent="dev")
    plain = await start_gateway(
        anonymous_agent="dev", database_url=compiled.database_url, compiled_path=False
    )
    return Pair(compiled, plain)


async def both(pair: Pair, variables: dict[str, Any]) -> dict[str, Any]:
    """The answer, the same from both paths; the compiled path must have answered."""
    path = compiled_path(pair.compiled)
    before = path.answered
    got = await pair.compiled.data(SEARCH, variables)
    assert path.answered == before + 1
    expected = await pair.plain.data(SEARCH, variables)
    assert json.dumps(got) == json.dumps(expected)
    return got["search"]


async def test_both_paths_answer_alike(pair: Pair) -> None:
    word, org = unique("c"), unique("Org")
    first = await ingest(pair.compiled, f"{word} renewal risk, the renewal", [f"org:{org}"])
    await ingest(pair.compiled, f"{word} the renewal", [f"org:{org}"])
    await ingest(pair.compiled, f"{word} café résumé renewal")
    then = first["updatedAt"]
    await pair.compiled.data(UPDATE, {"id": first["id"], "content": f"{word} churn"})

    found = await both(pair, {"text": f"{word} renewal", "first": 1})
    assert found["totalCount"] == 2 and found["totalCountExact"] is True
    hit = found["items"][0]
    content = hit["record"]["content"]
    assert all(content[h["start"] : h["end"]] == h["text"] for h in hit["highlights"])
    rest = await both(pair, {"text": f"{word} renewal", "after": found["pageInfo"]["endCursor"]})
    assert len(rest["items"]) == 1 and not rest["pageInfo"]["hasNextPage"]
    assert rest["items"][0]["textRank"] == 2

    matched = await both(pair, {"text": f"{word} renew", "match": [f"org:{org}"]})
    assert matched["totalCount"] == 1
    past = await both(pair, {"text": f"{word} renewal", "match": [f"org:{org}"], "asOf": then})
    # Then only the first record was written, with the words it has since lost.
    assert [i["record"]["id"] for i in past["items"]] == [first["id"]]
    assert past["items"][0]["record"]["version"] == 1
    assert past["totalCount"] == 1


@pytest.mark.parametrize(
    ("variables", "problem"),
    [
        ({"text": " "}, "text is empty"),
        ({}, "search needs text, vector or both"),
        ({"text": "x" * 1001}, "at most 1000"),
        ({"text": "renewal", "first": 501}, "first must be between 1 and 500"),
        ({"text": "renewal", "after": "nonsense"}, "cursor"),
    ],
)
async def test_bad_input_is_refused_naming_the_problem(
    pair: Pair, variables: dict[str, Any], problem: str
) -> None:
    for gateway in (pair.compiled, pair.plain):
        error = await gateway.error(SEARCH, variables)
        assert error["extensions"]["code"] == "BAD_USER_INPUT", error
        assert problem in error["message"]


WARNED = """
mutation($input: IngestInput!) {
  ingest(input: $input) {
    id warnings { code message property similarTo memberCount }
  }
}
"""
VALUES = """
query($label: String!, $similarTo: String) {
  values(label: $label, similarTo: $similarTo) {
    items { label value property memberCount } pageInfo { hasNextPage endCursor }
  }
}
"""


async def test_a_new_value_near_one_in_use_is_written_and_warned_of(pair: Pair) -> None:
    label = unique("org")
    for _ in range(2):
        await ingest(pair.compiled, "renewal note", [f"{label}:Acme"])
    data = await pair.compiled.data(
        WARNED, {"input": {"content": "x", "properties": [f"{label}:ACME"]}}
    )
    [warning] = data["ingest"]["warnings"]
    assert warning["code"] == "SIMILAR_VALUE"
    assert warning["property"] == f"{label}:ACME"
    assert (warning["similarTo"], warning["memberCount"]) == (f"{label}:Acme", 2)
    # An existing value is no news.
    again = await pair.compiled.data(
        WARNED, {"input": {"content": "x", "properties": [f"{label}:Acme"]}}
    )
    assert again["ingest"]["warnings"] == []
    listed = await pair.compiled.data(VALUES, {"label": label, "similarTo": "acme"})
    assert [(v["value"], v["memberCount"]) for v in listed["values"]["items"]] == [
        ("ACME", 1),
        ("Acme", 3),
    ]

    async with over_http(pair.compiled) as session:
        told = await call(session, "e_ingest", content="y", properties=[f"{label}:acme"])
        assert [w["similar_to"] for w in told["warnings"]] == [f"{label}:Acme", f"{label}:ACME"]
        values = await call(session, "e_property", action="values", label=label, similar_to="ACME")
        assert [v["property"] for v in values["items"]] == [f"{label}:Acme", f"{label}:acme"]
        found = await call(session, "e_search", text="renewal", match=[f"{label}:Acme"], first=1)
        [hit] = found["items"]
        assert hit["snippet"] == "renewal note" and hit["matched"] == ["renewal"]
        assert hit["properties"] == [f"{label}:Acme"] and hit["text_rank"] == 1
        assert found["total_count"] == 2 and found["page_info"]["has_next_page"]
        empty = await refused(session, "e_search", text="")
        assert empty["code"] == "BAD_USER_INPUT" and "text is empty" in empty["error"]


async def test_a_lane_declaring_a_language_is_searched_in_it_from_the_start(
    start_gateway: GatewayFactory,
) -> None:
    policy = (
        "lanes: {notes: {text_search: english}}\nagents: {dev: {read: [notes], write: [notes]}}"
    )
    gateway = await start_gateway(policy_yaml=policy, anonymous_agent="dev")
    record = await ingest(gateway, "Renewals were risky", lane="notes")
    found = (await gateway.data(SEARCH, {"text": "renewal risk"}))["search"]
    assert [i["record"]["id"] for i in found["items"]] == [record["id"]]
    assert [h["text"] for h in found["items"][0]["highlights"]] == ["Renewals", "risky"]


async def test_a_question_is_answered_alike_on_both_paths_and_over_mcp(pair: Pair) -> None:
    who, org = unique("Sarah"), unique("Org")
    evidence = await ingest(pair.compiled, f"{who} took over the renewal for {org}", [f"org:{org}"])
    await ingest(pair.compiled, f"{who} likes coffee", [f"org:{org}"])
    question = f"when did {who} take over the {org} renewal?"
    found = await both(pair, {"text": question, "syntax": "NATURAL"})
    assert found["items"][0]["record"]["id"] == evidence["id"]
    assert found["terms"] == [
        "when",
        "did",
        who.lower(),
        "take",
        "over",
        "the",
        org.lower(),
        "renewal",
    ]
    assert found["dropped"] == [] and found["hint"] is None
    hit = found["items"][0]
    assert hit["matchedTerms"] == [who.lower(), "over", "the", org.lower(), "renewal"]
    content = hit["record"]["content"]
    assert all(content[h["start"] : h["end"]] == h["text"] for h in hit["highlights"])
    # Strictly, every word is required and none holds "when": nothing, and a hint.
    strict = await both(pair, {"text": question})
    assert strict["items"] == [] and strict["totalCount"] == 0
    assert strict["hint"] is not None and "NATURAL" not in strict["hint"]
    nothing = await both(pair, {"text": unique("absent"), "syntax": "NATURAL"})
    assert nothing["items"] == [] and "no record you can read holds" in nothing["hint"]

    async with over_http(pair.compiled) as session:
        told = await call(session, "e_search", text=question)
        assert told["items"][0]["id"] == evidence["id"]
        assert told["items"][0]["matched"] == hit["matchedTerms"]
        assert told["terms"] == found["terms"]
