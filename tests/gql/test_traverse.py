"""Traverse: hops over imputed, asserted and typed edges, label and type filters, hubs, lanes,
asOf, limit."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from store.kinds.record import traverse
from store.pool import create_pool
from tests.conftest import GatewayFactory
from tests.gql._api import REMOVE, RETIRE_RECORD, ingest, unique
from tests.gql._asserted import TRAVERSE, connect, group, walk
from tests.gql._differential import compiled_path
from tests.gql._edges import RETIRE, upsert
from tests.gql._policy_support import mint
from tests.support import Gateway

# Only ids back: a hub of a thousand records asks for no more than that.
INGEST_MANY = "mutation($inputs: [IngestInput!]!) { ingestMany(inputs: $inputs) { id } }"


def steps(found: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(i["record"]["id"], i["hop"], i["via"]) for i in found["items"]]


async def test_hops_follow_labels_connections_and_groups(gateway: Gateway) -> None:
    topic = unique("topic:")
    a = (await ingest(gateway, "a", [topic]))["id"]
    b = (await ingest(gateway, "b", [topic]))["id"]
    c = (await ingest(gateway, "c"))["id"]
    d = (await ingest(gateway, "d"))["id"]
    link = await connect(gateway, b, c)
    team = await group(gateway, [c, d])
    assert steps(await walk(gateway, a)) == [(b, 1, topic)]
    assert steps(await walk(gateway, a, depth=3)) == [
        (b, 1, topic),
        (c, 2, link["id"]),
        (d, 3, team["id"]),
    ]
    # labels limits what is walked: from b over connections only.
    assert steps(await walk(gateway, b, depth=3, labels=["e_connect"])) == [(c, 1, link["id"])]
    assert steps(await walk(gateway, b, depth=2, labels=["topic", "e_group"])) == [(a, 1, topic)]
    found = await walk(gateway, a, depth=3)
    assert found["notShown"] == 0 and found["clipped"] == [] and found["beyondLimit"] == 0


async def test_limit_cuts_and_counts_what_it_cut(gateway: Gateway) -> None:
    shared = unique("org:")
    start = (await ingest(gateway, "start", [shared]))["id"]
    others = sorted([(await ingest(gateway, f"o{n}", [shared]))["id"] for n in range(3)])
    found = await walk(gateway, start, limit=2)
    assert steps(found) == [(others[0], 1, shared), (others[1], 1, shared)]
    assert found["beyondLimit"] == 1 and found["notShown"] == 1


async def test_as_of_walks_the_edges_as_they_were(gateway: Gateway) -> None:
    shared = unique("org:")
    a = await ingest(gateway, "a", [shared])
    b = (await ingest(gateway, "b", [shared]))["id"]
    removed = (await gateway.data(REMOVE, {"id": b, "properties": [shared]}))["removeProperties"]
    assert steps(await walk(gateway, a["id"])) == []
    then = removed["record"]["createdAt"]
    assert steps(await walk(gateway, a["id"], asOf=then)) == [(b, 1, shared)]


async def test_a_hub_is_clipped_and_counted_not_dropped(gateway: Gateway) -> None:
    hub, near = unique("hub:"), unique("near:")
    start = (await ingest(gateway, "start", [hub, near]))["id"]
    neighbour = (await ingest(gateway, "neighbour", [near]))["id"]
    inputs = [{"content": f"m{n}", "properties": [hub]} for n in range(1000)]
    await gateway.data(INGEST_MANY, {"inputs": inputs})
    found = await walk(gateway, start, depth=2)
    assert steps(found) == [(neighbour, 1, near)]
    assert found["clipped"] == [{"via": hub, "hop": 1, "memberCount": 1001}]
    assert found["notShown"] == 1001


POLICY = """
lanes:
  alpha: {}
  beta: {}
agents:
  writer: { read: [alpha, beta], write: [alpha, beta] }
  a: { read: [alpha], write: [alpha] }
"""


async def test_unreadable_records_are_neither_shown_nor_counted(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(POLICY)
    tokens = await mint(gateway, "writer", "a")
    shared = unique("org:")

    async def write(lane: str, n: int) -> list[str]:
        inputs = [{"content": f"{lane}{k}", "properties": [shared], "lane": lane} for k in range(n)]
        made = await gateway.data(INGEST_MANY, {"inputs": inputs}, tokens["writer"])
        return [r["id"] for r in made["ingestMany"]]

    start, friend = await write("alpha", 2)
    await write("beta", 1000)
    await write("beta", 1)
    # For the writer the value is a hub; for a, who reads alpha alone, it joins two records.
    found = await walk(gateway, start, tokens["writer"])
    assert found["items"] == [] and found["clipped"][0]["memberCount"] == 1003
    found = await walk(gateway, start, tokens["a"], depth=2)
    assert steps(found) == [(friend, 1, shared)]
    assert found["notShown"] == 0 and found["clipped"] == []
    body = await gateway.post(TRAVERSE, {"from": start}, tokens["a"])
    assert "beta" not in str(body)


async def test_bad_arguments_are_refused_with_the_range(gateway: Gateway) -> None:
    start = (await ingest(gateway, "s"))["id"]
    for args, text in (
        ({"depth": 0}, "depth must be between 1 and 3"),
        ({"depth": 4}, "depth must be between 1 and 3"),
        ({"limit": 0}, "limit must be between 1 and 1000"),
        ({"labels": [], "edgeTypes": []}, "nothing would be walked"),
        ({"edgeTypes": [f"t{n}" for n in range(33)]}, "at most 32"),
    ):
        error = await gateway.error(TRAVERSE, {"from": start, **args})
        assert error["extensions"]["code"] == "BAD_USER_INPUT" and text in error["message"]
    error = await gateway.error(TRAVERSE, {"from": "sr_" + "0" * 32})
    assert error["extensions"]["code"] == "NOT_FOUND"


async def test_counts_past_the_budget_are_marked_lower_bounds(gateway: Gateway) -> None:
    """A walk counts what it leaves out within its budget of membership rows; past it the
    count is a lower bound, and what it lists is the same whatever the budget."""
    values = [unique(f"t{n}:") for n in range(5)]
    start = (await ingest(gateway, "start", values))["id"]
    # Six records on each value of the start's, none on two.
    inputs = [{"content": f"{v}{k}", "properties": [v]} for v in values for k in range(6)]
    await gateway.data(INGEST_MANY, {"inputs": inputs})
    pool = await create_pool(gateway.database_url, 1)
    try:
        async with pool.acquire() as conn:

            async def walked(limit: int, **kw: Any) -> traverse.Traversal:
                return await traverse.traverse(conn, start, ["default"], limit=limit, **kw)

            exact = await walked(3)
            assert exact.beyond_limit == 27 and exact.not_shown_exact
            # The first value (seven members, the start one of them) is read; the four
            # after it are not, so what was cut is known to be at least 3.
            bounded = await walked(3, budget=6)
            assert bounded.steps == exact.steps
            assert bounded.beyond_limit == 3 and not bounded.not_shown_exact
            # Too few records in what the budget reads to fill the page: it reads on.
            for limit in (10, 30):
                full, cut = await walked(limit), await walked(limit, budget=6)
                assert cut.steps == full.steps and len(cut.steps) == limit
                assert full.not_shown_exact and full.beyond_limit == 30 - limit
            # As of an instant, a hub's members are counted from the intervals, up to the
            # budget shared among the hubs (at least one past the hub size).
            now = datetime.now(UTC)
            hubs = await walked(100, hub=2, budget=4, as_of=now)
            assert [c.member_count for c in hubs.clipped] == [3] * 5
            assert not any(c.exact for c in hubs.clipped) and not hubs.not_shown_exact
            hubs = await walked(100, hub=2, budget=100, as_of=now)
            assert [(c.member_count, c.exact) for c in hubs.clipped] == [(7, True)] * 5
            # Now, a hub's count is the maintained one: exact whatever the budget.
            hubs = await walked(100, hub=2, budget=1)
            assert [(c.member_count, c.exact) for c in hubs.clipped] == [(7, True)] * 5
    finally:
        await pool.close()
    found = await walk(gateway, start, limit=3)
    assert found["beyondLimit"] == 27 and found["notShownExact"] is True


async def test_typed_edges_are_walked_either_way_as_every_read_sees_them(
    gateway: Gateway,
) -> None:
    a, b, c, d, e = [(await ingest(gateway, name))["id"] for name in "abcde"]
    quote = {"quote": "see b", "source": "a.md", "offset": 4}
    supports = await upsert(gateway, fromId=a, toId=b, type="supports", evidence=quote)
    link = await upsert(gateway, fromId=c, toId=a, type="links_to", detector="wikilink@2")
    onward = await upsert(gateway, fromId=b, toId=d, type="related_to")
    await upsert(gateway, fromId=a, toId=e, type="supports")
    before = datetime.now(UTC).isoformat()
    # A retired record hides its edges; a retired edge is gone now, there as of before.
    await gateway.data(RETIRE_RECORD, {"id": e})
    await gateway.data(RETIRE, {"id": onward["id"]})
    path = compiled_path(gateway)
    answered = path.answered
    found = await walk(gateway, a, depth=2)
    # Typed edges by type, either way.
    assert steps(found) == [(c, 1, "links_to"), (b, 1, "supports")]
    assert found["items"][0]["edge"] == {
        "id": link["id"],
        "type": "links_to",
        "detector": "wikilink@2",
        "evidence": None,
    }
    assert found["items"][1]["edge"]["evidence"] == quote
    assert found["notShown"] == 0
    assert path.answered == answered + 1, "answered on the compiled path"
    assert steps(await walk(gateway, a, edgeTypes=["supports"])) == [(b, 1, "supports")]
    assert steps(await walk(gateway, a, edgeTypes=[])) == []
    then = await walk(gateway, a, depth=2, asOf=before)
    # By type, then by record id.
    assert steps(then) == [
        (c, 1, "links_to"),
        *sorted([(b, 1, "supports"), (e, 1, "supports")]),
        (d, 2, "related_to"),
    ]
    assert {i["record"]["id"]: i["edge"]["id"] for i in then["items"]}[b] == supports["id"]
    # A record reached both ways is reached by the typed edge; labels [] walks edges only.
    shared = unique("topic:")
    f = (await ingest(gateway, "f", [shared]))["id"]
    g = (await ingest(gateway, "g", [shared]))["id"]
    h = (await ingest(gateway, "h", [shared]))["id"]
    await upsert(gateway, fromId=g, toId=f, type="cites")
    assert steps(await walk(gateway, f)) == [(g, 1, "cites"), (h, 1, shared)]
    assert steps(await walk(gateway, f, labels=[])) == [(g, 1, "cites")]
    assert steps(await walk(gateway, f, labels=[], limit=1)) == [(g, 1, "cites")]
    cut = await walk(gateway, f, limit=1)
    assert steps(cut) == [(g, 1, "cites")] and cut["beyondLimit"] == 1


async def test_typed_edges_to_unreadable_records_are_neither_shown_nor_counted(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(POLICY)
    tokens = await mint(gateway, "writer", "a")
    writer = tokens["writer"]
    inputs = [{"content": name, "lane": lane} for name, lane in (("s", "alpha"), ("f", "alpha"))]
    inputs.append({"content": "hidden", "lane": "beta"})
    made = await gateway.data(INGEST_MANY, {"inputs": inputs}, writer)
    start, friend, hidden = [r["id"] for r in made["ingestMany"]]
    await upsert(gateway, writer, fromId=start, toId=hidden, type="supports")
    await upsert(gateway, writer, fromId=hidden, toId=friend, type="supports")
    await upsert(gateway, writer, fromId=friend, toId=start, type="cites")
    assert steps(await walk(gateway, start, writer)) == [
        (friend, 1, "cites"),
        (hidden, 1, "supports"),
    ]
    found = await walk(gateway, start, tokens["a"], depth=3)
    assert steps(found) == [(friend, 1, "cites")] and found["notShown"] == 0
