"""Two agents with disjoint lanes: nothing of one lane is readable or writable by the other.

Every operation of the API is tried by each agent against the other's data, and the
answer must be the one a non-existent record, property or event would get.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.conftest import GatewayFactory
from tests.gql._policy_support import (
    ADD,
    INGEST,
    INGEST_MANY,
    RECORD,
    REMOVE,
    UPDATE,
    ingest,
    mint,
    without_id,
)
from tests.support import Gateway

POLICY = """
lanes:
  alpha: {}
  beta: {}
agents:
  a: { read: [alpha], write: [alpha] }
  b: { read: [beta], write: [beta] }
"""
LANES = {"a": "alpha", "b": "beta"}
SHARED = "org:Shared"


@dataclass
class Agent:
    name: str
    token: str
    lane: str
    records: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    @property
    def ids(self) -> set[str]:
        return {r["id"] for r in self.records}


@dataclass
class World:
    gateway: Gateway
    agents: dict[str, Agent]

    async def data(self, agent: Agent, query: str, variables: Any = None) -> dict[str, Any]:
        return await self.gateway.data(query, variables, agent.token)

    async def error(self, agent: Agent, query: str, variables: Any = None) -> dict[str, Any]:
        return await self.gateway.error(query, variables, agent.token)

    async def record_version(self, owner: Agent, record_id: str) -> int:
        found = await self.data(owner, RECORD, {"id": record_id})
        version: int = found["record"]["version"]
        return version


@pytest.fixture(scope="module")
async def world(start_gateway: GatewayFactory) -> World:
    gateway = await start_gateway(policy_yaml=POLICY)
    tokens = await mint(gateway, "a", "b")
    agents = {name: Agent(name, tokens[name], lane) for name, lane in LANES.items()}
    for agent in agents.values():
        token = agent.token
        properties = [
            [SHARED, f"topic:{agent.name}-only"],
            [SHARED, "person:Sam"],
            [SHARED],
        ]
        count = 2 if agent.name == "a" else 3
        for n, props in enumerate(properties[:count]):
            agent.records.append(
                await ingest(
                    gateway, token, content=f"{agent.name} {n}", lane=agent.lane, properties=props
                )
            )
        first, second = agent.records[0]["id"], agent.records[1]["id"]
        await gateway.data(UPDATE, {"id": first, "content": f"{agent.name} changed"}, token)
        await gateway.data(ADD, {"id": second, "properties": ["stage:x"]}, token)
        events = await gateway.data("{ audit(first: 500) { items { id lane } } }", token=token)
        # events without a lane (policy changes) concern every agent
        agent.events = [e["id"] for e in events["audit"]["items"] if e["lane"] is not None]
    return World(gateway, agents)


PAIRS = [("a", "b"), ("b", "a")]


@pytest.fixture(params=PAIRS, ids=["a-on-b", "b-on-a"])
def pair(request: pytest.FixtureRequest, world: World) -> tuple[Agent, Agent]:
    me, other = request.param
    return world.agents[me], world.agents[other]


def random_id() -> str:
    return "sr_" + uuid.uuid4().hex


# -- writes -------------------------------------------------------------------------------


async def test_writing_to_the_other_lane_is_forbidden(
    world: World, pair: tuple[Agent, Agent]
) -> None:
    me, other = pair
    forbidden = (
        f"agent {me.name!r} may not write to lane {other.lane!r}; writable lanes: [{me.lane!r}]"
    )
    error = await world.error(me, INGEST, {"input": {"content": "x", "lane": other.lane}})
    assert error["message"] == forbidden
    assert error["extensions"]["code"] == "FORBIDDEN"
    assert error["extensions"]["allowed"] == [me.lane]

    inputs = [{"content": "mine", "lane": me.lane}, {"content": "theirs", "lane": other.lane}]
    error = await world.error(me, INGEST_MANY, {"inputs": inputs})
    assert error["message"] == f"inputs[1] refused, so nothing was written: {forbidden}"
    assert error["extensions"]["code"] == "FORBIDDEN"

    mine = await world.data(me, "{ records { totalCount } }")
    theirs = await world.data(other, "{ records { totalCount } }")
    assert mine["records"]["totalCount"] == len(me.records)
    assert theirs["records"]["totalCount"] == len(other.records)


async def test_the_other_lanes_records_cannot_be_changed(
    world: World, pair: tuple[Agent, Agent]
) -> None:
    me, other = pair
    target = other.records[1]
    versions = {r["id"]: await world.record_version(other, r["id"]) for r in other.records}
    for query, extra in [
        (UPDATE, {"content": "hijacked"}),
        (UPDATE, {"properties": ["org:Mine"]}),
        (ADD, {"properties": ["org:Mine"]}),
        (REMOVE, {"labels": ["org"]}),
        (REMOVE, {"properties": [SHARED]}),
    ]:
        for ident in (target["id"], target["id"][:9], target["id"][:20]):
            unknown = random_id()[: len(ident)]
            theirs = await world.error(me, query, {"id": ident, **extra})
            nobody = await world.error(me, query, {"id": unknown, **extra})
            assert theirs["extensions"]["code"] == "NOT_FOUND", theirs
            assert without_id(theirs, ident) == without_id(nobody, unknown)
    for record_id, version in versions.items():
        assert await world.record_version(other, record_id) == version


# -- reads of one record ----------------------------------------------------------------------


async def test_the_other_lanes_records_read_as_missing(
    world: World, pair: tuple[Agent, Agent]
) -> None:
    me, other = pair
    query = """query($id: ID!, $at: DateTime) {
      record(id: $id, asOf: $at) { id content versions { number } } }"""
    at = "2100-01-01T00:00:00+00:00"
    for record in other.records:
        for ident in (record["id"], record["id"][:9], record["id"][: 3 + 12]):
            for as_of in (None, at):
                body = await world.gateway.post(query, {"id": ident, "at": as_of}, me.token)
                assert body == {"data": {"record": None}}
    for record in me.records:
        found = await world.data(me, query, {"id": record["id"][:9], "at": None})
        assert found["record"]["id"] == record["id"]


# -- browse and gather ----------------------------------------------------------------------


async def test_browse_sees_only_the_own_lane(world: World, pair: tuple[Agent, Agent]) -> None:
    me, other = pair
    query = """query($lane: String) {
      records(lane: $lane, first: 500) { totalCount items { id lane } } }"""
    everything = (await world.data(me, query, {"lane": None}))["records"]
    assert {r["id"] for r in everything["items"]} == me.ids
    assert everything["totalCount"] == len(me.ids)
    for lane in (other.lane, "nowhere"):
        theirs = (await world.data(me, query, {"lane": lane}))["records"]
        assert theirs == {"totalCount": 0, "items": []}
    typed = await world.data(me, '{ records(sourceType: "conversational") { totalCount } }')
    assert typed["records"]["totalCount"] == len(me.ids)


@pytest.mark.parametrize("mode", ["INTERSECT", "UNION", "TIMELINE"])
async def test_gather_sees_only_the_own_lane(
    world: World, pair: tuple[Agent, Agent], mode: str
) -> None:
    me, other = pair
    query = """query($match: [String!]!, $mode: GatherMode, $lanes: [String!]) {
      gather(match: $match, mode: $mode, lanes: $lanes, first: 500) {
        totalCount items { id } } }"""

    async def gather(match: list[str], lanes: list[str] | None = None) -> tuple[int, set[str]]:
        page = (await world.data(me, query, {"match": match, "mode": mode, "lanes": lanes}))[
            "gather"
        ]
        return page["totalCount"], {item["id"] for item in page["items"]}

    assert await gather([SHARED]) == (len(me.ids), me.ids)
    assert await gather([SHARED], [me.lane, other.lane]) == (len(me.ids), me.ids)
    assert await gather([SHARED], [other.lane]) == (0, set())
    assert await gather([f"topic:{other.name}-only"]) == (0, set())
    assert await gather(["topic:nobody-has-this"]) == (0, set())
    sam = {me.records[1]["id"]}
    assert await gather([SHARED, "person:Sam"]) == (
        (1, sam) if mode == "INTERSECT" else (len(me.ids), me.ids)
    )


# -- labels and hyperedges ------------------------------------------------------------------


async def test_label_counts_count_only_the_own_lane(
    world: World, pair: tuple[Agent, Agent]
) -> None:
    me, other = pair
    labels = await world.data(me, "{ labels { label recordCount } }")
    counts = {row["label"]: row["recordCount"] for row in labels["labels"]}
    assert counts == {"org": len(me.records), "topic": 1, "person": 1, "stage": 1}
    theirs = await world.data(
        me, "query($l: String) { labels(lane: $l) { label } }", {"l": other.lane}
    )
    assert theirs["labels"] == []
    own = await world.data(
        me, "query($l: String) { labels(lane: $l) { label recordCount } }", {"l": me.lane}
    )
    assert own["labels"] == labels["labels"]


async def test_hyperedges_count_only_the_own_lane(world: World, pair: tuple[Agent, Agent]) -> None:
    me, other = pair
    query = """query($p: String!) { edgeProperty(property: $p) {
      property memberCount members(first: 500) { totalCount items { id } } } }"""
    shared = (await world.data(me, query, {"p": SHARED}))["edgeProperty"]
    assert shared["memberCount"] == len(me.ids)
    assert shared["members"]["totalCount"] == len(me.ids)
    assert {item["id"] for item in shared["members"]["items"]} == me.ids
    for missing in (f"topic:{other.name}-only", "topic:nobody-has-this"):
        assert await world.gateway.post(query, {"p": missing}, me.token) == {
            "data": {"edgeProperty": None}
        }
    on_record = await world.data(
        me,
        "query($id: ID!) { record(id: $id) { edgeProperties { property memberCount } } }",
        {"id": me.records[0]["id"]},
    )
    counts = {e["property"]: e["memberCount"] for e in on_record["record"]["edgeProperties"]}
    assert counts[SHARED] == len(me.ids)


# -- audit --------------------------------------------------------------------------------------


async def test_audit_shows_only_the_own_lane(world: World, pair: tuple[Agent, Agent]) -> None:
    me, other = pair
    page = (
        await world.data(me, "{ audit(first: 500) { totalCount items { id lane recordId kind } } }")
    )["audit"]
    assert page["totalCount"] == len(page["items"])
    assert {e["lane"] for e in page["items"]} <= {me.lane, None}
    assert {e["recordId"] for e in page["items"]} - {None} == me.ids
    assert not {e["id"] for e in page["items"]} & set(other.events)

    query = "query($id: ID!) { audit(recordId: $id) { totalCount } }"
    for ident in (other.records[0]["id"], other.records[0]["id"][:9]):
        unknown = random_id()[: len(ident)]
        theirs = await world.error(me, query, {"id": ident})
        nobody = await world.error(me, query, {"id": unknown})
        assert theirs["extensions"]["code"] == "NOT_FOUND"
        assert without_id(theirs, ident) == without_id(nobody, unknown)

    event = "query($id: ID!) { auditEvent(id: $id) { id before { content } after { content } } }"
    for event_id in other.events:
        assert await world.gateway.post(event, {"id": event_id}, me.token) == {
            "data": {"auditEvent": None}
        }
    assert await world.gateway.post(event, {"id": "ae_" + uuid.uuid4().hex}, me.token) == {
        "data": {"auditEvent": None}
    }
    own = [e["id"] for e in page["items"] if e["kind"] == "sr_updated"]
    [updated] = [(await world.data(me, event, {"id": event_id}))["auditEvent"] for event_id in own]
    assert updated["after"]["content"] == f"{me.name} changed"


async def test_profile_shows_only_the_own_lane(world: World, pair: tuple[Agent, Agent]) -> None:
    me, _ = pair
    profile = await world.data(
        me, "{ profile { agent readLanes writeLanes lanes { lane readable writable } } }"
    )
    assert profile["profile"] == {
        "agent": me.name,
        "readLanes": [me.lane],
        "writeLanes": [me.lane],
        "lanes": [{"lane": me.lane, "readable": True, "writable": True}],
    }


# -- prefixes shared across lanes ----------------------------------------------------------


async def test_a_prefix_shared_with_the_other_lane_is_not_ambiguous(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ids that share a prefix across lanes: each agent's prefix names only its own record."""
    crafted = iter(["sr_c0ffee" + "a" * 26, "sr_c0ffee" + "b" * 26])
    # the gateway runs in this process, so the ledger's id source can be steered
    monkeypatch.setattr("store.commands.new_record_id", lambda: next(crafted))
    a, b = world.agents["a"], world.agents["b"]
    mine = await ingest(world.gateway, a.token, content="a's", lane=a.lane)
    theirs = await ingest(world.gateway, b.token, content="b's", lane=b.lane)
    assert (mine["id"], theirs["id"]) == ("sr_c0ffee" + "a" * 26, "sr_c0ffee" + "b" * 26)
    for agent, record in ((a, mine), (b, theirs)):
        found = await world.data(agent, '{ record(id: "sr_c0ffee") { id } }')
        assert found["record"]["id"] == record["id"]
        updated = await world.data(agent, UPDATE, {"id": "sr_c0ffee", "content": "changed"})
        assert updated["update"]["id"] == record["id"]
        audit = await world.data(agent, '{ audit(recordId: "sr_c0ffee") { totalCount } }')
        assert audit["audit"]["totalCount"] == 2
    # bookkeeping for the other tests of this module
    a.records.append(mine)
    b.records.append(theirs)
