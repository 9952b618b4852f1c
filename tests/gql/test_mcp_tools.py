"""Each MCP tool and action once, over streamable HTTP and over stdio, and one change made
through a tool and through GraphQL leaving the same ledger entries and audit events."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from store.ids import edge_property_id
from store.kinds.record.vectors import availability
from store.ledger.hashing import written_hash
from tests.conftest import GatewayFactory
from tests.gql._api import unique
from tests.gql._mcp import Connect, call, over_each, over_http, refused
from tests.gql._policy_support import mint
from tests.support import Gateway, sql


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml)


@pytest.fixture(scope="module")
async def curator(crm: Gateway) -> str:
    return (await mint(crm, "curator"))["curator"]


@over_each
async def test_every_tool_and_action_once(connect: Connect, crm: Gateway, curator: str) -> None:
    org = unique("org:")
    async with connect(crm, curator) as s:
        profile = await call(s, "e_system", action="get_profile")
        assert profile["agent"] == "curator" and "notes" in profile["write_lanes"]

        first = await call(
            s,
            "e_ingest",
            content="Sarah owns Acme.",
            properties=[org, "person:Sarah"],
            assign_lane="notes",
        )
        assert first["version"] == 1 and first["properties"] == [org, "person:Sarah"]
        written = datetime.now(UTC).isoformat()
        many = await call(
            s,
            "e_ingest",
            records=[
                {
                    "content": "Renewal due.",
                    "properties": [org, "topic:renewal"],
                    "assign_lane": "notes",
                },
                {
                    "content": "Acme wants a discount.",
                    "properties": [org],
                    "assign_lane": "notes",
                    "adjusts": [first["id"]],
                },
            ],
        )
        second, third = many["records"]

        both = await call(s, "e_gather", action="intersect", match=[org, "topic:renewal"])
        assert [r["id"] for r in both["items"]] == [second["id"]]
        either = await call(s, "e_gather", action="union", match=[org])
        assert either["total_count"] == 3
        timeline = await call(s, "e_gather", action="timeline", match=[org], first=2)
        assert len(timeline["items"]) == 2 and timeline["page_info"]["has_next_page"]
        walked = await call(s, "e_gather", action="traverse", from_id=first["id"], depth=1)
        assert {i["record"]["id"] for i in walked["items"]} == {second["id"], third["id"]}
        assert [i["edge"] for i in walked["items"]] == [None, None]
        typed = await call(
            s, "e_gather", action="traverse", from_id=first["id"], labels=[], edge_types=["x"]
        )
        assert typed["items"] == [] and typed["not_shown"] == 0

        updated = await call(
            s, "e_update", id=first["id"], content="Sarah owns Acme now.", expected_version=2
        )
        assert updated["version"] == 3
        now = await call(s, "e_read", id=first["id"][:12], versions=True, first=2)
        assert now["content"] == "Sarah owns Acme now."
        assert [v["number"] for v in now["versions"]["items"]] == [1, 2]
        assert now["versions"]["page_info"] == {"has_next_page": True, "end_cursor": "2"}
        assert len(now["adjustments"]) == 1
        then = await call(s, "e_read", id=first["id"], as_of=written)
        assert then["content"] == "Sarah owns Acme." and then["version"] == 1

        listed = await call(s, "e_property", action="list", lane="notes")
        assert set(listed["items"][0]) == {"label", "record_count"}
        assert "org" in [i["label"] for i in listed["items"]]
        added = await call(
            s,
            "e_property",
            action="add",
            id=first["id"],
            properties=["topic:renewal", org, "e_group:x"],
        )
        assert added["added"] == ["topic:renewal"]
        assert added["already_held"] == [org] and added["rejected"] == ["e_group:x"]
        removed = await call(s, "e_property", action="remove", id=first["id"], labels=["person"])
        assert removed["removed"] == ["person:Sarah"]
        link = await call(
            s, "e_property", action="connect", a=first["id"], b=second["id"], hint="works_with"
        )
        assert link["id"].startswith("e_connect:works_with_") and link["active"]
        unlinked = await call(s, "e_property", action="disconnect", id=link["id"])
        assert not unlinked["active"]
        group = await call(
            s,
            "e_property",
            action="group",
            record_ids=[first["id"], second["id"], third["id"]],
            hint="deal",
        )
        assert len(group["records"]) == 3
        smaller = await call(
            s, "e_property", action="ungroup", id=group["id"], record_ids=[third["id"]]
        )
        assert {r["id"] for r in smaller["records"]} == {first["id"], second["id"]}

        history = await call(s, "e_audit", action="list", record_id=first["id"])
        kinds = [e["kind"] for e in history["items"]]
        assert kinds[:3] == ["sr_ingested", "adjusted", "sr_updated"]
        inspected = await call(s, "e_audit", action="inspect", id=history["items"][2]["id"])
        assert inspected["before"]["content"] == "Sarah owns Acme."
        assert inspected["after"]["content"] == "Sarah owns Acme now."
        feed = await call(s, "e_audit", action="feed", after=history["items"][0]["cursor"])
        assert feed["items"][0]["cursor"] == str(int(history["items"][0]["cursor"]) + 1)


async def test_the_feed_pages_to_the_end_and_then_waits_at_its_last_cursor(
    crm: Gateway, curator: str
) -> None:
    tag = unique("topic:")
    async with over_http(crm, curator) as s:
        start = await call(s, "e_audit", action="feed", after="0", first=500)
        while start["page_info"]["has_next_page"]:
            start = await call(
                s, "e_audit", action="feed", after=start["page_info"]["end_cursor"], first=500
            )
        cursor = start["page_info"]["end_cursor"]
        await call(
            s,
            "e_ingest",
            records=[
                {"content": f"e{i}", "properties": [tag], "assign_lane": "notes"} for i in range(25)
            ],
        )
        got: list[dict[str, Any]] = []
        while True:
            page = await call(s, "e_audit", action="feed", after=cursor, kinds=["sr_ingested"])
            got += page["items"]
            cursor = page["page_info"]["end_cursor"]
            if not page["page_info"]["has_next_page"]:
                break
        assert [len(got)] == [25]
        cursors = [int(e["cursor"]) for e in got]
        assert cursors == sorted(cursors) and len(set(cursors)) == 25
        again = await call(s, "e_audit", action="feed", after=cursor)
        assert again["items"] == [] and again["page_info"]["end_cursor"] == cursor


INGEST = "mutation($i: IngestInput!) { ingest(input: $i) { id } }"
ADD = "mutation($id: ID!, $p: [String!]!) { addProperties(id: $id, properties: $p) { added } }"


async def _trail(crm: Gateway, record_id: str) -> tuple[list[Any], list[Any]]:
    async with sql(crm.database_url) as conn:
        entries = await conn.fetch(
            "SELECT * FROM ledger WHERE kind = 'record' AND object_id = $1 ORDER BY version",
            record_id,
        )
        events = await conn.fetch(
            "SELECT * FROM audit_events WHERE record_id = $1 ORDER BY seq", record_id
        )
    return entries, events


def _state(row: Any, record_id: str, to: str = "<id>") -> Any:
    """An entry's state (jsonb, as text over plain asyncpg) with its record id replaced."""
    return json.loads(row["state"].replace(record_id, to))


async def test_a_change_through_a_tool_and_through_graphql_leaves_the_same_trail(
    crm: Gateway, curator: str
) -> None:
    org = unique("org:")
    async with over_http(crm, curator) as s:
        made = await call(s, "e_ingest", content="same", properties=[org], assign_lane="notes")
        await call(s, "e_property", action="add", id=made["id"], properties=["topic:x"])
    by_tool = made["id"]
    by_graphql = (
        await crm.data(
            INGEST, {"i": {"content": "same", "properties": [org], "lane": "notes"}}, token=curator
        )
    )["ingest"]["id"]
    await crm.data(ADD, {"id": by_graphql, "p": ["topic:x"]}, token=curator)

    tool_entries, tool_events = await _trail(crm, by_tool)
    graphql_entries, graphql_events = await _trail(crm, by_graphql)
    assert len(tool_entries) == len(graphql_entries) == 2
    for mine, theirs in zip(tool_entries, graphql_entries, strict=True):
        for column in ("kind", "version", "event", "actor", "policy_version", "hash_format"):
            assert mine[column] == theirs[column], column
        assert _state(mine, by_tool) == _state(theirs, by_graphql)
        # The tool's entry hashed with the other's id, time and previous hash is the
        # other's hash: the same canonical bytes apart from ids and times.
        assert theirs["hash"] == written_hash(
            kind=mine["kind"],
            object_id=by_graphql,
            version=mine["version"],
            event=mine["event"],
            actor=mine["actor"],
            at=theirs["at"],
            policy_version=mine["policy_version"],
            state=_state(mine, by_tool, by_graphql),
            prev_hash=theirs["prev_hash"],
        )
    assert [e["kind"] for e in tool_events] == ["sr_ingested", "property_added"]
    for mine, theirs in zip(tool_events, graphql_events, strict=True):
        for column in ("kind", "lane", "actor", "version_before", "version_after", "object_kind"):
            assert mine[column] == theirs[column], column
        assert _ids_out(mine["payload"], by_tool) == _ids_out(theirs["payload"], by_graphql)


EMBEDDED = """
lanes:
  notes: { embedding: { dimensions: 3, model: m3 } }
  plain: {}
agents:
  dev: { read: ["*"], write: ["*"] }
"""


async def test_e_ingest_takes_an_embedding_of_the_size_the_lane_declares(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(policy_yaml=EMBEDDED, anonymous_agent="dev")
    async with sql(gateway.database_url) as conn:
        off = await availability(conn)
    both, label = unique("t:"), unique("org")
    async with over_http(gateway) as s:
        one_wrong = {"content": "x", "assign_lane": "notes", "embedding": [1.0, 0.0]}
        many_wrong = {"records": [{"content": "x", "assign_lane": "notes", "embedding": [1] * 4}]}
        for size, wrong in ((2, one_wrong), (4, many_wrong)):
            told = await refused(s, "e_ingest", **wrong)
            assert told["code"] == "BAD_USER_INPUT", told
            assert (
                f"a vector of {size} numbers does not fit lane 'notes': its policy declares "
                "embeddings of 3 dimensions made by model 'm3'"
            ) in told["error"]
        told = await refused(s, "e_ingest", content="x", assign_lane="plain", embedding=[1, 0, 0])
        assert "lane 'plain' declares no embedding" in told["error"]

        one = await call(
            s,
            "e_ingest",
            content="one",
            properties=[both, f"{label}:Acme"],
            assign_lane="notes",
            embedding=[1, 0, 0],
        )
        item = {"content": "many", "assign_lane": "notes", "embedding": [0, 1, 0]}
        [many] = (
            await call(s, "e_ingest", records=[{**item, "properties": [both, f"{label}:ACME"]}])
        )["records"]
        # The near-duplicate warning rides on a write with a vector as on any other.
        assert [w["similar_to"] for w in many["warnings"]] == [f"{label}:Acme"]
        async with sql(gateway.database_url) as conn:
            kept = await conn.fetch(
                "SELECT object_id, state->'embedding' AS e FROM ledger WHERE kind = 'record' "
                "AND object_id = ANY($1::text[])",
                [one["id"], many["id"]],
            )
        assert {r["object_id"]: len(json.loads(r["e"])) for r in kept} == {
            one["id"]: 3,
            many["id"]: 3,
        }
        if off is not None:
            told = await refused(s, "e_search", vector=[1, 0, 0])
            assert told["code"] == "BAD_USER_INPUT" and "pgvector" in told["error"]
            return
        found = await call(s, "e_search", vector=[1, 0.1, 0], match=[both])
        assert [(h["id"], h["vector_rank"]) for h in found["items"]] == [
            (one["id"], 1),
            (many["id"], 2),
        ]


def _ids_out(payload: str, record_id: str) -> str:
    """A payload with its record's id and the ep_ ids derived from it (each checked to be
    derived from it) replaced."""
    for label, value in re.findall(r'"label": "([^"]*)", "value": "([^"]*)"', payload):
        payload = payload.replace(edge_property_id(record_id, label, value), "<ep>")
    return payload.replace(record_id, "<id>")


@over_each
async def test_every_typed_edge_tool_once(connect: Connect, crm: Gateway, curator: str) -> None:
    async with connect(crm, curator) as s:
        a = await call(s, "e_ingest", content="Acme renews in May.", assign_lane="notes")
        b = await call(s, "e_ingest", content="Acme churns in May.", assign_lane="notes")
        supports = await call(
            s,
            "edge_upsert",
            from_id=a["id"],
            to_id=b["id"][:12],
            type="supports",
            weight=0.8,
            evidence={"quote": "renews", "source": "call notes", "offset": 5},
        )
        assert supports["id"].startswith("edge_") and supports["version"] == 1
        assert supports["to_id"] == b["id"] and supports["evidence"]["quote"] == "renews"
        too_heavy = await s.call_tool(
            "edge_upsert", {"from_id": a["id"], "to_id": b["id"], "type": "supports", "weight": 2}
        )
        assert too_heavy.is_error
        on_graphql = await crm.error(
            "mutation($i: EdgeInput!) { upsertEdge(input: $i) { id } }",
            {"i": {"fromId": a["id"], "toId": b["id"], "type": "supports", "weight": 2}},
            token=curator,
        )
        assert too_heavy.structured_content is not None
        assert too_heavy.structured_content["error"] == on_graphql["message"]
        assert too_heavy.structured_content["code"] == on_graphql["extensions"]["code"]

        listed = await call(s, "edge_list", from_id=a["id"])
        assert [e["id"] for e in listed["items"]] == [supports["id"]]
        around = await call(s, "related", id=a["id"])
        assert around["outgoing"]["items"][0]["to_record"]["id"] == b["id"]
        assert around["incoming"]["total_count"] == 0

        clash = await call(s, "edge_upsert", from_id=b["id"], to_id=a["id"], type="contradicts")
        queue = await call(s, "conflicts")
        assert clash["id"] in [e["id"] for e in queue["items"]]
        resolved = await call(
            s,
            "conflict_resolve",
            edge_id=clash["id"],
            resolution="superseded",
            resolver="curator-agent",
            winner_id=a["id"],
        )
        assert resolved["resolution"] == "SUPERSEDED" and resolved["winner_id"] == a["id"]
        queue = await call(s, "conflicts", status="unresolved")
        assert clash["id"] not in [e["id"] for e in queue["items"]]

        around_a = await call(s, "ego", nodes=[a["id"]])
        assert {e["id"] for e in around_a["edges"]} == {supports["id"], clash["id"]}
        assert [n["id"] for n in around_a["neighbors"]] == [b["id"]]

        retired = await call(s, "retire", id=supports["id"])
        assert retired["invalid_at"] is not None
        assert (await call(s, "edge_list", from_id=a["id"]))["total_count"] == 0
        kept = await call(s, "edge_list", from_id=a["id"], include_expired=True)
        assert kept["total_count"] == 1
        gone = await call(s, "retire", id=b["id"], reason="churn was a rumour")
        assert gone["version"] > b["version"]
        assert (await call(s, "edge_list", to_id=a["id"]))["total_count"] == 0
