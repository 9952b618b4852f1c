"""Every value the documented limits allow is stored, found and read back, whatever the
width of its characters in UTF-8; an idempotency key over its limit is refused first."""

from __future__ import annotations

from typing import Any

import pytest

from policies.properties import MAX_LABEL_LENGTH, MAX_VALUE_LENGTH
from store.limits import MAX_IDEMPOTENCY_KEY_LENGTH
from tests.conftest import GatewayFactory
from tests.gql._api import INGEST, INGEST_MANY, UPDATE, ingest, record_total, unique
from tests.support import Gateway

# Each the widest its UTF-8 gets: 4 bytes (an emoji, outside the BMP) and 3 bytes (CJK).
WIDE = {"4-byte": "\U0001f600", "3-byte": "\u6f22"}

EDGE_PROPERTY = """
query($property: String!) {
  edgeProperty(property: $property) {
    property memberCount members { totalCount items { id } }
  }
}
"""
GATHER = """
query($match: [String!]!, $mode: GatherMode) {
  gather(match: $match, mode: $mode) { totalCount items { id properties } }
}
"""
RECORD = "query($id: ID!) { record(id: $id) { properties edgeProperties { value memberCount } } }"


@pytest.fixture(scope="module", params=["compiled", "ordinary"])
async def gateway(request: pytest.FixtureRequest, start_gateway: GatewayFactory) -> Gateway:
    return await start_gateway(anonymous_agent="dev", compiled_path=request.param == "compiled")


def longest(char: str, stem: str) -> tuple[str, str]:
    """The longest label and value allowed, of `char`, apart from other tests' by `stem`."""
    return (
        stem + char * (MAX_LABEL_LENGTH - len(stem)),
        stem + char * (MAX_VALUE_LENGTH - len(stem)),
    )


@pytest.mark.parametrize("width", sorted(WIDE))
async def test_the_longest_label_and_value_round_trip(gateway: Gateway, width: str) -> None:
    label, value = longest(WIDE[width], unique("v"))
    prop = f"{label}:{value}"
    first = await ingest(gateway, "one", [prop, "org:Acme"])
    assert first["properties"] == [prop, "org:Acme"]
    second = (
        await gateway.data(INGEST_MANY, {"inputs": [{"content": "two", "properties": [prop]}]})
    )["ingestMany"][0]
    members = sorted([first["id"], second["id"]])

    for mode in ("INTERSECT", "UNION", "TIMELINE"):
        found = (await gateway.data(GATHER, {"match": [prop], "mode": mode}))["gather"]
        assert found["totalCount"] == 2, mode
        assert sorted(item["id"] for item in found["items"]) == members, mode
    edge = (await gateway.data(EDGE_PROPERTY, {"property": prop}))["edgeProperty"]
    assert edge["property"] == prop and edge["memberCount"] == 2
    assert sorted(i["id"] for i in edge["members"]["items"]) == members
    record = (await gateway.data(RECORD, {"id": first["id"]}))["record"]
    assert [(e["value"], e["memberCount"]) for e in record["edgeProperties"]] == [
        (value, 2),
        ("Acme", record["edgeProperties"][1]["memberCount"]),
    ]

    # Moved off and back on by update: the membership closes and opens again.
    await gateway.data(UPDATE, {"id": first["id"], "properties": [f"{label}:short"]})
    found = (await gateway.data(GATHER, {"match": [prop]}))["gather"]
    assert [i["id"] for i in found["items"]] == [second["id"]]
    updated = (await gateway.data(UPDATE, {"id": first["id"], "properties": [prop]}))["update"]
    assert sorted(updated["properties"]) == sorted([prop, "org:Acme"])
    found = (await gateway.data(GATHER, {"match": [prop]}))["gather"]
    assert sorted(i["id"] for i in found["items"]) == members


async def test_values_sharing_a_long_prefix_stay_apart(gateway: Gateway) -> None:
    """Long values are indexed by a digest: two that differ only at the end are two edges."""
    label, value = longest(WIDE["3-byte"], unique("p"))
    a = await ingest(gateway, "a", [f"{label}:{value[:-1]}a"])
    b = await ingest(gateway, "b", [f"{label}:{value[:-1]}b"])
    for record, end in ((a, "a"), (b, "b")):
        found = (await gateway.data(GATHER, {"match": [f"{label}:{value[:-1]}{end}"]}))["gather"]
        assert [i["id"] for i in found["items"]] == [record["id"]]


def write(key: str) -> dict[str, Any]:
    return {"input": {"content": "keyed", "idempotencyKey": key}}


@pytest.mark.parametrize("width", sorted(WIDE))
async def test_the_longest_idempotency_key_is_accepted_and_retried(
    gateway: Gateway, width: str
) -> None:
    stem = unique("k")
    key = stem + WIDE[width] * (MAX_IDEMPOTENCY_KEY_LENGTH - len(stem))
    first = (await gateway.data(INGEST, write(key)))["ingest"]
    again = (await gateway.data(INGEST, write(key)))["ingest"]
    assert again["id"] == first["id"]


async def test_an_idempotency_key_over_its_limit_is_refused_naming_it(gateway: Gateway) -> None:
    before = await record_total(gateway)
    key = unique("k") + "x" * 3000
    error = await gateway.error(INGEST, write(key))
    assert error["extensions"] == {
        "code": "BAD_USER_INPUT",
        "allowed": MAX_IDEMPOTENCY_KEY_LENGTH,
    }
    assert error["message"] == (
        f"idempotencyKey is {len(key)} characters; at most {MAX_IDEMPOTENCY_KEY_LENGTH} are "
        "allowed (a UUID is 36)"
    )
    inputs = [{"content": "fine", "idempotencyKey": unique("k")}, write(key)["input"]]
    error = await gateway.error(INGEST_MANY, {"inputs": inputs})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert str(MAX_IDEMPOTENCY_KEY_LENGTH) in error["message"]
    assert await record_total(gateway) == before
