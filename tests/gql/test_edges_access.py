"""Typed edges and the lanes: an edge is read only by a reader of both its records, an
unreadable endpoint is refused as a missing one, writing needs the from record's lane;
ego's counters; and the feed carrying each edge event only to whom may read it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import GatewayFactory
from tests.gql._edges import EGO, RELATED, RESOLVE, RETIRE, UPSERT, edges, ego, upsert
from tests.gql._feed import feed_client, newest_cursor
from tests.gql._policy_support import ingest, mint, without_id
from tests.support import Gateway

POLICY = """
lanes:
  open: {}
  hidden: {}
  shared: {}
agents:
  reader: { read: [open, shared], write: [open] }
  curator: { read: ["*"], write: ["*"] }
"""


class World:
    def __init__(self, gateway: Gateway, tokens: dict[str, str]) -> None:
        self.gateway = gateway
        self.tokens = tokens
        self.ids: dict[str, str] = {}

    async def record(self, name: str, lane: str) -> str:
        made = await ingest(self.gateway, self.tokens["curator"], content=name, lane=lane)
        self.ids[name] = made["id"]
        return str(made["id"])

    async def edge(self, agent: str = "curator", **fields: Any) -> dict[str, Any]:
        for end in ("fromId", "toId"):
            fields[end] = self.ids.get(fields[end], fields[end])
        return await upsert(self.gateway, self.tokens[agent], **fields)


@pytest.fixture(scope="module")
async def world(start_gateway: GatewayFactory) -> World:
    gateway = await start_gateway(policy_yaml=POLICY)
    w = World(gateway, await mint(gateway, "reader", "curator"))
    for name, lane in [("a", "open"), ("b", "open"), ("c", "open"), ("d", "open")]:
        await w.record(name, lane)
    await w.record("s", "shared")
    await w.record("h", "hidden")
    return w


async def test_an_unreadable_endpoint_is_refused_as_a_missing_one(world: World) -> None:
    g, reader = world.gateway, world.tokens["reader"]
    hidden, missing = world.ids["h"], "sr_" + "e" * 32
    for end in ("fromId", "toId"):
        seen = []
        for other in (hidden, missing):
            fields = {"fromId": world.ids["a"], "toId": world.ids["b"], "type": "supports"}
            fields[end] = other
            error = await g.error(UPSERT, {"input": fields}, reader)
            assert error["extensions"]["code"] == "NOT_FOUND"
            seen.append(without_id(error, other))
        assert seen[0] == seen[1]
    # Writing needs write access to the from record's lane: the reader reads 'shared'.
    error = await g.error(
        UPSERT, {"input": {"fromId": world.ids["s"], "toId": world.ids["a"], "type": "x"}}, reader
    )
    assert error["extensions"]["code"] == "FORBIDDEN" and "open" in error["message"]
    # ...but an edge from its own lane to a record it may only read is its to write.
    made = await world.edge("reader", fromId="a", toId="s", type="cites")
    assert made["provenanceActor"] == "reader"
    # An edge the curator wrote to a hidden record does not exist for the reader.
    secret = await world.edge(fromId="a", toId="h", type="contradicts")
    for document, args in [
        (RETIRE, {"id": secret["id"]}),
        (RESOLVE, {"edgeId": secret["id"], "resolution": "REFUTED", "resolver": "r"}),
    ]:
        error = await g.error(document, args, reader)
        missing_edge = "edge_" + "f" * 32
        other = await g.error(
            document,
            {**args, **dict.fromkeys(args.keys() & {"id", "edgeId"}, missing_edge)},
            reader,
        )
        assert error["extensions"]["code"] == "NOT_FOUND"
        assert without_id(error, secret["id"]) == without_id(other, missing_edge)


async def test_reads_show_only_edges_between_readable_records(world: World) -> None:
    g, reader = world.gateway, world.tokens["reader"]
    a = world.ids["a"]
    mine = await world.edge(fromId="a", toId="c", type="supports", namespace="reads")
    await world.edge(fromId="a", toId="h", type="supports", namespace="reads")
    await world.edge(fromId="h", toId="a", type="supports", namespace="reads")
    page = await edges(g, reader, fromId=a, namespace="reads")
    assert [e["id"] for e in page["items"]] == [mine["id"]] and page["totalCount"] == 1
    assert (await edges(g, world.tokens["curator"], fromId=a, namespace="reads"))["totalCount"] == 2
    around = (await g.data(RELATED, {"id": a, "namespace": "reads"}, reader))["related"]
    assert [e["id"] for e in around["outgoing"]["items"]] == [mine["id"]]
    assert around["incoming"] == {
        "totalCount": 0,
        "items": [],
        "pageInfo": {"hasNextPage": False, "endCursor": None},
    }
    view = await ego(g, reader, nodes=[a], types=["supports"])
    assert world.ids["h"] not in {e["toId"] for e in view["edges"]} | {
        e["fromId"] for e in view["edges"]
    }


async def test_ego_counts_what_it_leaves_out_and_refuses_more_than_two_hops(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(policy_yaml=POLICY)
    w = World(gateway, await mint(gateway, "reader", "curator"))
    for name, lane in [("a", "open"), ("b", "open"), ("c", "open"), ("d", "open")]:
        await w.record(name, lane)
    await w.record("e", "open")
    await w.record("h", "hidden")
    ab = await w.edge(fromId="a", toId="b", type="supports", weight=0.9)
    ac = await w.edge(fromId="a", toId="c", type="supports", weight=0.5)
    await w.edge(fromId="c", toId="a", type="related_to", weight=0.7)
    bd = await w.edge(fromId="b", toId="d", type="supports", weight=0.8)
    retired = await w.edge(fromId="a", toId="e", type="supports")
    await gateway.data(RETIRE, {"id": retired["id"]}, w.tokens["curator"])
    await w.edge(fromId="a", toId="h", type="supports")  # the reader never sees it
    await w.edge(fromId="h", toId="b", type="supports")
    reader = w.tokens["reader"]
    a = w.ids["a"]

    one = await ego(gateway, reader, nodes=[a[:10]], types=["supports"])
    assert [e["id"] for e in one["edges"]] == [ab["id"], ac["id"]]  # weight, strongest first
    assert one["hops"] == [1, 1]
    assert one["notShown"] == {
        "expiredExcluded": 1,
        "edgesClipped": 0,
        "typeFiltered": 1,
        "danglingIds": [],
    }
    assert [n["id"] for n in one["neighbors"]] == sorted([w.ids["b"], w.ids["c"]])
    # The curator sees the hidden record's edges; the reader's counts never reveal them.
    full = await ego(gateway, w.tokens["curator"], nodes=[a], types=["supports"])
    assert len(full["edges"]) == 3

    two = await ego(gateway, reader, nodes=[a, "sr_" + "0" * 32], hops=2, types=["supports"])
    assert [(e["id"], h) for e, h in zip(two["edges"], two["hops"], strict=True)] == [
        (ab["id"], 1),
        (ac["id"], 1),
        (bd["id"], 2),
    ]
    assert two["notShown"]["danglingIds"] == ["sr_" + "0" * 32]
    clipped = await ego(gateway, reader, nodes=[a], hops=2, types=["supports"], limit=2)
    assert [e["id"] for e in clipped["edges"]] == [ab["id"], ac["id"]]
    assert clipped["notShown"]["edgesClipped"] == 1
    shown = await ego(gateway, reader, nodes=[a], types=["supports"], includeExpired=True)
    assert retired["id"] in [e["id"] for e in shown["edges"]]
    assert shown["notShown"]["expiredExcluded"] == 0
    out = await ego(gateway, reader, nodes=[a], direction="IN")
    assert [e["type"] for e in out["edges"]] == ["related_to"]
    assert out["notShown"]["typeFiltered"] == 0

    for hops in (0, 3):
        error = await gateway.error(EGO, {"nodes": [a], "hops": hops}, reader)
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert (
            f"hops is {hops}; ego expands 1 or 2 hops. To go further, call ego again"
            in (error["message"])
        )


async def test_the_feed_carries_each_edge_event_to_a_reader_of_both_ends_only(
    world: World,
) -> None:
    g = world.gateway
    start = await newest_cursor(g)
    kinds = ["edge_upserted", "edge_retired", "conflict_resolved"]
    async with (
        feed_client(g, world.tokens["reader"]) as reader,
        feed_client(g, world.tokens["curator"]) as curator,
    ):
        await reader.subscribe("r", kinds=kinds)
        await curator.subscribe("c", kinds=kinds)
        await asyncio.sleep(0.3)
        seen = await world.edge(fromId="b", toId="d", type="contradicts", namespace="feed")
        hidden = await world.edge(fromId="b", toId="h", type="contradicts", namespace="feed")
        for made in (seen, hidden):
            await g.data(
                RESOLVE,
                {"edgeId": made["id"], "resolution": "ACCEPTED_DUAL", "resolver": "cur"},
                world.tokens["curator"],
            )
            await g.data(RETIRE, {"id": made["id"]}, world.tokens["curator"])
        both = await curator.events("c", 6)
        assert [(e["kind"], e["payload"]["edgeId"]) for e in both] == [
            ("edge_upserted", seen["id"]),
            ("edge_upserted", hidden["id"]),
            ("conflict_resolved", seen["id"]),
            ("edge_retired", seen["id"]),
            ("conflict_resolved", hidden["id"]),
            ("edge_retired", hidden["id"]),
        ]
        mine = await reader.events("r", 3)
        assert [(e["kind"], e["payload"]["edgeId"]) for e in mine] == [
            ("edge_upserted", seen["id"]),
            ("conflict_resolved", seen["id"]),
            ("edge_retired", seen["id"]),
        ]
        assert (
            mine[0]["payload"]["toId"] == world.ids["d"] and mine[0]["recordId"] == world.ids["b"]
        )
        await reader.nothing("r", 1.0)
        # Replayed from the table, the same.
        await reader.subscribe("replay", kinds=kinds, after=start)
        replayed = await reader.events("replay", 3)
        assert [e["id"] for e in replayed] == [e["id"] for e in mine]
        await reader.nothing("replay", 0.5)
    audit = await g.data(
        "query($k: [String!]) { audit(kinds: $k) { totalCount items { payload } } }",
        {"k": kinds},
        world.tokens["reader"],
    )
    assert hidden["id"] not in str(audit["audit"]["items"])
