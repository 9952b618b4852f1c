"""Two agents with disjoint lanes: nothing of one lane is readable or writable by the other.

Every operation of the API is tried by each agent against the other's data, and the
answer must be the one a non-existent record, property or event would get.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.conftest import GatewayFactory
from tests.gql._asserted import CONNECT, CORRECT, DISCONNECT, GROUP, UNADJUST, UNGROUP
from tests.gql._feed import feed_client
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
    monkeypatch.setattr("store.kinds.record.commands.new_record_id", lambda: next(crafted))
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


# -- payloads that name or count records ------------------------------------------------------

EDGE_POLICY = """
lanes:
  alpha: {}
  beta: {}
agents:
  a: { read: [alpha], write: [alpha] }
  b: { read: [beta], write: [beta] }
  looker: { read: [alpha, beta], write: [alpha] }
  curator: { read: [alpha, beta], write: [alpha, beta] }
"""
EDGE_READS = {"a": {"alpha"}, "b": {"beta"}, "curator": {"alpha", "beta"}}
EVENT_FIELDS = "id kind recordId lane payload"
ONE_EVENT = f"query($id: ID!) {{ auditEvent(id: $id) {{ {EVENT_FIELDS} }} }}"
LIVE = f"subscription($after: String) {{ auditEvents(after: $after) {{ {EVENT_FIELDS} }} }}"


@dataclass
class Edges:
    gateway: Gateway
    tokens: dict[str, str]

    async def record(self, lane: str, **fields: Any) -> str:
        made = await ingest(self.gateway, self.tokens["curator"], content=lane, lane=lane, **fields)
        record_id: str = made["id"]
        return record_id

    async def do(self, query: str, variables: dict[str, Any], agent: str = "curator") -> Any:
        return await self.gateway.data(query, variables, self.tokens[agent])

    async def refused(self, query: str, variables: dict[str, Any], agent: str) -> dict[str, Any]:
        return await self.gateway.error(query, variables, self.tokens[agent])

    async def audit(self, agent: str, record_id: str | None = None) -> list[dict[str, Any]]:
        query = f"""query($id: ID, $after: String) {{
          audit(recordId: $id, first: 500, after: $after) {{
            items {{ {EVENT_FIELDS} }} pageInfo {{ hasNextPage endCursor }} }} }}"""
        found: list[dict[str, Any]] = []
        after = None
        while True:
            page = (await self.do(query, {"id": record_id, "after": after}, agent))["audit"]
            found += page["items"]
            if not page["pageInfo"]["hasNextPage"]:
                return found
            after = page["pageInfo"]["endCursor"]


@pytest.fixture(scope="module")
async def edges(start_gateway: GatewayFactory) -> Edges:
    gateway = await start_gateway(policy_yaml=EDGE_POLICY)
    return Edges(gateway, await mint(gateway, "a", "b", "looker", "curator"))


def payload_of(events: list[dict[str, Any]], kind: str, record_id: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in events if e["kind"] == kind and e["recordId"] == record_id]


async def test_payloads_name_and_count_only_readable_records(edges: Edges) -> None:
    """A curator connects, groups, adjusts and corrects across two lanes; each reader sees
    every payload without the other lane's records, in `audit`, `audit(recordId:)`,
    `auditEvent`, the live feed and its replay from "0", as if they did not exist."""
    gateway = edges.gateway
    async with (
        feed_client(gateway, edges.tokens["a"]) as a_live,
        feed_client(gateway, edges.tokens["b"]) as b_live,
        feed_client(gateway, edges.tokens["curator"]) as c_live,
    ):
        live = {"a": a_live, "b": b_live, "curator": c_live}
        # The same document for every reader: renderings are shared per set of lanes only.
        for client in live.values():
            await client.subscribe("live", LIVE)
        await asyncio.sleep(0.5)  # subscribed before the first write

        x1, x2 = await edges.record("alpha"), await edges.record("alpha")
        y1, y2 = await edges.record("beta"), await edges.record("beta")
        await edges.do(CONNECT, {"a": x1, "b": y1, "hint": "across"})
        await edges.do(CONNECT, {"a": x1, "b": x2, "hint": "within"})
        team = [x1, x2, y1, y2]
        await edges.do(GROUP, {"ids": team, "hint": "team"})
        n1 = await edges.record("alpha", adjusts=[x2, y2])
        m1 = await edges.record("beta", adjusts=[x1])
        for record_id in (x1, y1):
            await edges.do(CORRECT, {"id": record_id, "content": "right", "reason": "why"})
        lanes = {x1: "alpha", x2: "alpha", n1: "alpha", y1: "beta", y2: "beta", m1: "beta"}

        whole = [e for e in await edges.audit("curator") if e["recordId"] in lanes]
        # The curator reads both lanes: the payloads as written, naming across lanes.
        assert {p["other"] for p in payload_of(whole, "connected", x1)} == {y1, x2}
        assert [p["members"] for p in payload_of(whole, "grouped", y1)] == [4]
        assert [p["adjusts"] for p in payload_of(whole, "adjusted", n1)] == [sorted([x2, y2])]
        assert [p.get("adjustedBy") for p in payload_of(whole, "adjusted", x1)] == [m1]

        for agent, reads in EDGE_READS.items():
            hidden = {rid for rid, lane in lanes.items() if lane not in reads}
            mine = sorted(rid for rid, lane in lanes.items() if lane in reads)
            expected = [
                {**e, "payload": as_seen(e, reads, lanes, team)}
                for e in whole
                if e["lane"] in reads
            ]
            everything = await edges.audit(agent)
            for event in everything:
                assert not any(rid in json.dumps(event["payload"]) for rid in hidden), event
            assert [e for e in everything if e["recordId"] in lanes] == expected, agent
            by_record = [e for rid in mine for e in await edges.audit(agent, rid)]
            assert sorted(by_record, key=by_id) == sorted(expected, key=by_id), agent
            for event in expected:
                one = await edges.do(ONE_EVENT, {"id": event["id"]}, agent)
                assert one["auditEvent"] == event
            assert await live[agent].events("live", len(expected)) == expected, agent
            async with feed_client(gateway, edges.tokens[agent]) as replaying:
                await replaying.subscribe("replay", LIVE, after="0")
                replayed = await replaying.events("replay", len(everything))
            assert [e for e in replayed if e["recordId"] in lanes] == expected, agent

        a_view = await edges.audit("a")
        # What agent a sees, spelled out: only its own lane's ends, members and links.
        assert [p.get("other") for p in payload_of(a_view, "connected", x1)] == [None, x2]
        assert [p["members"] for p in payload_of(a_view, "grouped", x1)] == [2]
        assert [p["adjusts"] for p in payload_of(a_view, "adjusted", n1)] == [[x2]]
        assert [p.get("adjustedBy") for p in payload_of(a_view, "adjusted", x2)] == [n1]
        assert [p for p in payload_of(a_view, "adjusted", x1) if "adjustedBy" in p] == []
        assert payload_of(a_view, "corrected", x1)[0]["reason"] == "why"
        b_view = await edges.audit("b")
        assert [p["adjusts"] for p in payload_of(b_view, "adjusted", m1)] == [[]]
        assert [p["members"] for p in payload_of(b_view, "grouped", y2)] == [2]


def by_id(event: dict[str, Any]) -> str:
    event_id: str = event["id"]
    return event_id


def as_seen(
    event: dict[str, Any], reads: set[str], lanes: dict[str, str], team: list[str]
) -> dict[str, Any]:
    """A payload as written, with what a reader of `reads` may not read taken out."""
    payload = dict(event["payload"])
    for key in ("other", "adjustedBy"):
        if key in payload and lanes[payload[key]] not in reads:
            del payload[key]
    if "adjusts" in payload:
        payload["adjusts"] = [rid for rid in payload["adjusts"] if lanes[rid] in reads]
    if event["kind"] == "grouped":
        payload["members"] = sum(lanes[rid] in reads for rid in team)
    return payload


# -- changing a set that joins records the caller cannot read or write --------------------------

GROUPS = "query($id: ID!) { record(id: $id) { version groups { id records { id } } } }"
CHAINS = "query($id: ID!) { record(id: $id) { version adjustments { id records { id } } } }"


def hidden_refusal(error: dict[str, Any], what: str, ident: str) -> None:
    assert error["extensions"]["code"] == "FORBIDDEN", error
    assert error["message"] == (
        f"{what} '{ident}' also joins records in lanes you may not read; only an agent that may "
        "read and write every record it joins can change it (you may change those whose "
        "records are all in the lanes ['alpha'])"
    )
    assert error["extensions"]["allowed"] == ["alpha"]


def unwritable_refusal(error: dict[str, Any]) -> None:
    assert error["extensions"]["code"] == "FORBIDDEN", error
    assert error["message"] == (
        "agent 'looker' may not write to lane 'beta'; writable lanes: ['alpha']"
    )


async def test_a_group_joining_records_the_caller_cannot_read_or_write_is_not_changed(
    edges: Edges,
) -> None:
    x1, x2, x3 = [await edges.record("alpha") for _ in range(3)]
    y1 = await edges.record("beta")
    made = (await edges.do(GROUP, {"ids": [x1, x2, x3, y1], "hint": "team"}))["group"]
    before = {rid: await edges.do(GROUPS, {"id": rid}) for rid in (x1, x2, x3, y1)}
    for ids in ([x1], [x1, x2], None):
        hidden_refusal(
            await edges.refused(UNGROUP, {"id": made["id"], "ids": ids}, "a"), "group", made["id"]
        )
        unwritable_refusal(await edges.refused(UNGROUP, {"id": made["id"], "ids": ids}, "looker"))
    for rid, seen in before.items():
        assert await edges.do(GROUPS, {"id": rid}) == seen
    # A group of the caller's own lanes is its to change.
    own = (await edges.do(GROUP, {"ids": [x2, x3], "hint": "own"}, "a"))["group"]
    gone = (await edges.do(UNGROUP, {"id": own["id"], "ids": [x2]}, "a"))["ungroup"]
    assert gone["active"] is False
    left = (await edges.do(UNGROUP, {"id": made["id"], "ids": [x1]}))["ungroup"]
    assert sorted(r["id"] for r in left["members"]["items"]) == sorted([x2, x3, y1])


async def test_a_chain_joining_records_the_caller_cannot_read_or_write_is_not_changed(
    edges: Edges,
) -> None:
    x1, x2 = await edges.record("alpha"), await edges.record("alpha")
    y1 = await edges.record("beta", adjusts=[x1, x2])
    [chain] = (await edges.do(CHAINS, {"id": y1}))["record"]["adjustments"]
    assert sorted(r["id"] for r in chain["records"]) == sorted([x1, x2, y1])
    before = {rid: await edges.do(CHAINS, {"id": rid}) for rid in (x1, x2, y1)}
    count = '{ records(lane: "alpha") { totalCount } }'
    written = (await edges.do(count, {}))["records"]["totalCount"]
    adjusting = {"input": {"content": "next", "lane": "alpha", "adjusts": [x1]}}
    hidden_refusal(await edges.refused(INGEST, adjusting, "a"), "adjustment chain", chain["id"])
    many = {"inputs": [{"content": "mine", "lane": "alpha"}, adjusting["input"]]}
    error = await edges.refused(INGEST_MANY, many, "a")
    assert error["extensions"]["code"] == "FORBIDDEN"
    assert error["message"].startswith("inputs[1] refused, so nothing was written: ")
    unwritable_refusal(await edges.refused(INGEST, adjusting, "looker"))
    unadjusting = {"id": x1, "adjustment": chain["id"]}
    hidden_refusal(await edges.refused(UNADJUST, unadjusting, "a"), "adjustment chain", chain["id"])
    unwritable_refusal(await edges.refused(UNADJUST, unadjusting, "looker"))
    for rid, seen in before.items():
        assert await edges.do(CHAINS, {"id": rid}) == seen
    assert (await edges.do(count, {}))["records"]["totalCount"] == written
    # A chain of the caller's own lanes is its to grow and cut.
    mine = (await edges.do(INGEST, {"input": {"content": "x", "lane": "alpha"}}, "a"))["ingest"]
    grown = {"input": {"content": "x'", "lane": "alpha", "adjusts": [mine["id"]]}}
    assert (await edges.do(INGEST, grown, "a"))["ingest"]["id"]
    # The curator reads and writes both lanes.
    assert (await edges.do(INGEST, adjusting))["ingest"]["id"]
    assert (await edges.do(UNADJUST, unadjusting))["unadjust"]["active"] is True


async def test_a_connection_to_a_record_the_caller_cannot_read_is_not_changed(
    edges: Edges,
) -> None:
    x1, y1 = await edges.record("alpha"), await edges.record("beta")
    made = (await edges.do(CONNECT, {"a": x1, "b": y1, "hint": "across"}))["connect"]
    disconnecting = {"id": made["id"]}
    hidden_refusal(await edges.refused(DISCONNECT, disconnecting, "a"), "connection", made["id"])
    unwritable_refusal(await edges.refused(DISCONNECT, disconnecting, "looker"))
    assert (await edges.do(DISCONNECT, disconnecting))["disconnect"]["active"] is False


async def test_a_chain_gained_while_locking_is_decided_on_too(
    edges: Edges, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chains of an adjusted record are looked up before it is locked: one it gained in
    between (its first look-up missed it) is looked up again, not adjusted unchecked."""
    from store.kinds.record import locks

    x1 = await edges.record("alpha")
    await edges.record("beta", adjusts=[x1])
    [chain] = (await edges.do(CHAINS, {"id": x1}))["record"]["adjustments"]
    looked: list[list[tuple[str, str]]] = []
    carried = locks._carried

    async def late(*args: Any) -> list[tuple[str, str]]:
        found = await carried(*args)
        looked.append(found)
        return [] if len(looked) == 1 else found

    monkeypatch.setattr(locks, "_carried", late)
    adjusting = {"input": {"content": "next", "lane": "alpha", "adjusts": [x1]}}
    hidden_refusal(await edges.refused(INGEST, adjusting, "a"), "adjustment chain", chain["id"])
    assert looked == [[("e_adjustment", chain["id"].split(":", 1)[1])]] * 2
