"""Adjustment chains: grown over ingests, unadjusted, kept out of labels and gathers."""

from __future__ import annotations

import re
from typing import Any

from tests.gql._api import ingest, unique
from tests.gql._asserted import UNADJUST, asserted, events, ids, walk
from tests.support import Gateway

CHAIN_ID = re.compile(r"^e_adjustment:adj_[0-9a-f]{32}$")
LABELS = "{ labels { label recordCount } }"


async def adjust(gateway: Gateway, content: str, adjusts: list[str], **kw: Any) -> dict[str, Any]:
    return await ingest(gateway, content, adjusts=adjusts, **kw)


async def test_a_chain_of_three_over_three_ingests_with_unadjust_in_the_middle(
    gateway: Gateway,
) -> None:
    topic = unique("topic:pricing")
    a = (await ingest(gateway, "price is 10", [topic]))["id"]
    b = (await adjust(gateway, "price is 12", [a[:12]], properties=[topic]))["id"]
    [chain] = (await asserted(gateway, b))["adjustments"]
    assert CHAIN_ID.match(chain["id"]), chain["id"]
    assert chain["hint"] == "adj" and ids(chain) == [a, b]
    # Adjusting the newer record again adds the next link to the same chain.
    c = (await adjust(gateway, "price is 15", [b]))["id"]
    [grown] = (await asserted(gateway, c))["adjustments"]
    assert grown["id"] == chain["id"] and ids(grown) == [a, b, c]
    assert (await asserted(gateway, a))["adjustments"][0]["id"] == chain["id"]
    # a got the chain as a new version; b was already on it, so c's ingest left b alone.
    assert (await asserted(gateway, a))["version"] == 2
    assert (await asserted(gateway, b))["version"] == 1
    assert [k for k, _ in await events(gateway, a)] == ["sr_ingested", "adjusted"]
    kinds = [k for k, _ in await events(gateway, c)]
    assert kinds == ["sr_ingested", "adjusted"]
    _, payload = (await events(gateway, c))[-1]
    assert payload == {"adjustments": [chain["id"]], "adjusts": [b]}

    # unadjust takes the middle record off; the chain keeps the other two in order.
    left = (await gateway.data(UNADJUST, {"id": b, "adjustment": chain["id"]}))["unadjust"]
    assert left["active"] and ids(left) == [a, c]
    now = await asserted(gateway, b)
    assert now["adjustments"] == [] and now["version"] == 2
    assert now["versions"][-1]["event"] == "unadjusted"
    assert [k for k, _ in await events(gateway, b)][-1] == "unadjusted"
    # Taking one of the last two off ends the chain for both.
    ended = (await gateway.data(UNADJUST, {"id": c, "adjustment": chain["id"]}))["unadjust"]
    assert ended["active"] is False and sorted(ids(ended)) == sorted([a, c])
    assert (await asserted(gateway, a))["adjustments"] == []


async def test_an_adjusted_record_on_no_chain_gets_a_new_one(gateway: Gateway) -> None:
    a = (await ingest(gateway, "a"))["id"]
    b = (await ingest(gateway, "b"))["id"]
    first = (await adjust(gateway, "a'", [a]))["id"]
    both = (await adjust(gateway, "a'' and b'", [first, b]))["id"]
    chains = {c["id"]: ids(c) for c in (await asserted(gateway, both))["adjustments"]}
    assert len(chains) == 2
    assert sorted(chains.values()) == sorted([[a, first, both], [b, both]])


async def test_adjustments_stay_out_of_labels_properties_and_gathers(gateway: Gateway) -> None:
    mark = unique("mark:")
    a = (await ingest(gateway, "a", [mark]))["id"]
    b = (await adjust(gateway, "b", [a], properties=[mark]))["id"]
    [chain] = (await asserted(gateway, b))["adjustments"]
    record = await asserted(gateway, b)
    assert record["properties"] == [mark]
    assert [ep["property"] for ep in record["edgeProperties"]] == [mark]
    assert all(chain["id"] not in version["properties"] for version in record["versions"]), record[
        "versions"
    ]
    labels = [row["label"] for row in (await gateway.data(LABELS))["labels"]]
    assert "e_adjustment" not in labels and "mark" in labels
    gather = (
        "query($m: [String!]!, $mode: GatherMode) { gather(match: $m, mode: $mode) { totalCount } }"
    )
    for mode in ("INTERSECT", "UNION", "TIMELINE"):
        found = await gateway.data(gather, {"m": [chain["id"]], "mode": mode})
        assert found["gather"]["totalCount"] == 0, mode
        found = await gateway.data(gather, {"m": [chain["id"], mark], "mode": mode})
        assert found["gather"]["totalCount"] == 2, mode
    hyperedge = "query($p: String!) { edgeProperty(property: $p) { memberCount } }"
    assert (await gateway.data(hyperedge, {"p": chain["id"]}))["edgeProperty"] is None
    # traverse walks the chain, and names it as the edge it came by.
    found = await walk(gateway, a, labels=["e_adjustment"])
    assert [(i["record"]["id"], i["hop"], i["via"]) for i in found["items"]] == [
        (b, 1, chain["id"])
    ]


async def test_adjusts_an_unknown_record_is_refused_and_writes_nothing(gateway: Gateway) -> None:
    error = await gateway.error(
        "mutation($i: IngestInput!) { ingest(input: $i) { id } }",
        {"i": {"content": "x", "adjusts": ["sr_" + "0" * 32]}},
    )
    assert error["extensions"]["code"] == "NOT_FOUND"
    error = await gateway.error(
        UNADJUST, {"id": "sr_" + "0" * 32, "adjustment": "e_adjustment:adj_" + "0" * 32}
    )
    assert error["extensions"]["code"] == "NOT_FOUND"
