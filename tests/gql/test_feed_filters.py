"""auditEvents(match:, recordIds:) over a real socket: records joining, changing on and
leaving a gather, what is asserted on given records, the filtered resume, and rights."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from store.tables import named_ids, names_records
from tests.conftest import GatewayFactory
from tests.gql._api import ADD, INGEST, REMOVE, UPDATE, ingest, unique
from tests.gql._asserted import CORRECT, connect
from tests.gql._edges import upsert
from tests.gql._feed import (
    FIELDS,
    FeedClient,
    feed_client,
    newest_cursor,
    no_transaction_waits,
    watch_idly,
)
from tests.gql._policy_support import mint
from tests.support import Gateway, plan_nodes, sql

FILTERED = f"""
subscription($after: String, $match: [String!], $mode: GatherMode, $recordIds: [ID!],
             $kinds: [String!], $actors: [String!]) {{
  auditEvents(after: $after, match: $match, mode: $mode, recordIds: $recordIds,
              kinds: $kinds, actors: $actors) {{ {FIELDS} }}
}}
"""


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml)


def seen(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["recordId"], e["kind"]) for e in events]


async def until_live(
    client: FeedClient, gateway: Gateway, ops: list[str], properties: list[str]
) -> dict[str, Any]:
    """Probes on the gather until every subscription of `ops` receives one live; the
    event of the probe they all received."""
    for _ in range(20):
        probe = await ingest(gateway, "probe", properties)
        event: dict[str, Any] | None = None
        try:
            for op in ops:
                while (event := await client.event(op, 2.0))["recordId"] != probe["id"]:
                    pass
        except TimeoutError:
            continue
        assert event is not None
        return event
    raise AssertionError("the subscriptions never went live")


async def test_match_sees_records_join_change_on_and_leave_a_gather(gateway: Gateway) -> None:
    project, team = unique("project:"), unique("team:")
    got: dict[str, list[dict[str, Any]]] = {}
    async with feed_client(gateway) as client:
        await client.subscribe("one", FILTERED, match=[project])
        await client.subscribe("both", FILTERED, match=[project, team])
        await client.subscribe("any", FILTERED, match=[project, team], mode="UNION")
        probe = await until_live(client, gateway, ["one", "both", "any"], [project, team])

        a = await ingest(gateway, "on the project", [project])  # joins one, any
        b = await ingest(gateway, "elsewhere", [unique("project:")])  # on none
        await gateway.data(UPDATE, {"id": a["id"], "content": "still on it"})  # changes on it
        await gateway.data(ADD, {"id": b["id"], "properties": [team]})  # b joins any
        await gateway.data(ADD, {"id": a["id"], "properties": [team]})  # a joins both
        await gateway.data(REMOVE, {"id": a["id"], "properties": [project]})  # a leaves one, both
        await gateway.data(UPDATE, {"id": a["id"], "content": "gone from it"})  # on any only
        await gateway.data(UPDATE, {"id": b["id"], "content": "b on the team"})  # on any

        for op, count in (("one", 4), ("both", 2), ("any", 7)):
            got[op] = await client.events(op, count)
        for op in ("one", "both", "any"):
            await client.nothing(op, 0.5)
    assert seen(got["one"]) == [
        (a["id"], "sr_ingested"),
        (a["id"], "sr_updated"),
        (a["id"], "property_added"),
        (a["id"], "property_removed"),
    ]
    assert seen(got["both"]) == [(a["id"], "property_added"), (a["id"], "property_removed")]
    assert seen(got["any"]) == [
        (a["id"], "sr_ingested"),
        (a["id"], "sr_updated"),
        (b["id"], "property_added"),
        (a["id"], "property_added"),
        (a["id"], "property_removed"),
        (a["id"], "sr_updated"),
        (b["id"], "sr_updated"),
    ]

    # The resume from a cursor applies the same filter, from the table: the same events.
    after = probe["cursor"]
    async with feed_client(gateway) as client:
        await client.subscribe("one", FILTERED, match=[project], after=after)
        await client.subscribe("both", FILTERED, match=[project, team], after=after)
        await client.subscribe("any", FILTERED, match=[project, team], mode="UNION", after=after)
        for op in ("one", "both", "any"):
            assert await client.events(op, len(got[op])) == got[op]
            await client.nothing(op, 0.3)


async def test_record_ids_follow_a_record_and_what_is_asserted_on_it(gateway: Gateway) -> None:
    start = await newest_cursor(gateway)
    a = await ingest(gateway, "watched")
    c = await ingest(gateway, "its neighbour")
    # From the cursor after both: the subscription misses nothing however long it takes
    # to start (a live-only one might, on a loaded machine).
    written = await newest_cursor(gateway)
    async with feed_client(gateway) as client:
        # A unique prefix names the record, as everywhere a record id is taken.
        await client.subscribe("a", FILTERED, recordIds=[a["id"][:12]], after=written)
        await client.subscribe("resumed", FILTERED, recordIds=[a["id"]], after=start)
        assert seen([await client.event("resumed")]) == [(a["id"], "sr_ingested")]
        await gateway.data(UPDATE, {"id": c["id"], "content": "not about a"})
        await gateway.data(UPDATE, {"id": a["id"], "content": "about a"})
        edge = await connect(gateway, a["id"], c["id"])
        await gateway.data(CORRECT, {"id": a["id"], "content": "a, corrected"})
        # A typed edge from c to a: its event is c's, and its payload names a (toId).
        typed = await upsert(gateway, fromId=c["id"], toId=a["id"], type="related_to")
        live = await client.events("a", 5)
        await client.nothing("a", 0.5)
        assert await client.events("resumed", 5) == live
    assert (live[4]["recordId"], live[4]["kind"]) == (c["id"], "edge_upserted")
    assert live[4]["payload"]["edgeId"] == typed["id"]
    # Both ends of the connection report it; c's event names a in its payload.
    assert seen(live)[0] == (a["id"], "sr_updated") and seen(live)[3] == (a["id"], "corrected")
    assert sorted(seen(live)[1:3]) == sorted([(a["id"], "connected"), (c["id"], "connected")])
    other_end = next(e for e in live if e["recordId"] == c["id"])
    assert other_end["payload"]["other"] == a["id"]
    assert other_end["payload"]["property"] == edge["id"]

    # The replay's spelling of the events naming a record is the payload index's own
    # (with the table this small the planner would scan it, so scans are ruled out).
    async with sql(gateway.database_url) as conn, conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")
        plan = await conn.fetchval(
            f"""EXPLAIN (FORMAT JSON) SELECT seq FROM audit_events e
            WHERE {named_ids("e.payload")} ?| ARRAY[$1::text] AND {names_records("e.payload")}""",
            a["id"],
        )
    assert "ix_audit_events_named" in {n.get("Index Name") for n in plan_nodes(json.loads(plan))}


async def test_a_filtered_subscription_gets_nothing_of_an_unreadable_lane(crm: Gateway) -> None:
    minted = await mint(crm, "curator", "sales", "planner")
    org = unique("org:")
    start = await newest_cursor(crm)
    async with feed_client(crm, minted["sales"]) as client:
        await client.subscribe("org", FILTERED, match=[org], after=start)
        # A notes record on the same edge: sales may not read notes.
        note = (
            await crm.data(
                INGEST,
                {"input": {"content": "hidden", "lane": "notes", "properties": [org]}},
                minted["planner"],
            )
        )["ingest"]
        deal = (
            await crm.data(
                INGEST,
                {
                    "input": {
                        "content": "a deal",
                        "lane": "crm",
                        "sourceType": "deal",
                        "properties": [org, "stage:lead"],
                    }
                },
                minted["curator"],
            )
        )["ingest"]
        # Live (or replayed, had it started late), and then replayed from the table alone.
        await client.subscribe("resumed", FILTERED, match=[org], after=start)
        for op in ("org", "resumed"):
            assert seen([await client.event(op)]) == [(deal["id"], "sr_ingested")]
            await client.nothing(op, 0.5)
        # A record it may not read is not found, as in every read.
        await client.subscribe("hidden", FILTERED, recordIds=[note["id"]])
        error = await client.error("hidden")
        assert error["extensions"]["code"] == "NOT_FOUND", error


async def test_watches_on_a_gather_of_unreadable_members_hold_no_connection(crm: Gateway) -> None:
    minted = await mint(crm, "curator", "sales", "planner")
    org = unique("org:")
    # The gather's only member is in notes, which sales may not read: empty to sales.
    await crm.data(
        INGEST,
        {"input": {"content": "hidden", "lane": "notes", "properties": [org]}},
        minted["planner"],
    )
    # More idle watches than the read pool (of 4 in the tests) has connections.
    async with watch_idly(crm, minted["sales"], [org], 6) as client:
        await no_transaction_waits(crm)
        read = crm.data("{ records(first: 1) { totalCount } }", token=minted["planner"])
        await asyncio.wait_for(read, 5)
        async with asyncio.timeout(5), feed_client(crm, minted["curator"]):
            pass
        deal = {"content": "a deal", "lane": "crm", "sourceType": "deal", "properties": [org]}
        joined = (await crm.data(INGEST, {"input": deal}, minted["curator"]))["ingest"]
        for n in range(6):
            message = await client.message(f"w{n}")
            assert message["type"] == "next", message
            change = message["payload"]["data"]["watch"]
            assert (change["change"], change["record"]["id"]) == ("JOINED", joined["id"])


async def test_actors_narrow_the_feed_to_some_agents(crm: Gateway) -> None:
    minted = await mint(crm, "curator", "planner")
    start = await newest_cursor(crm)
    async with feed_client(crm, minted["curator"]) as client:
        await client.subscribe("resumed", FILTERED, actors=["planner"], after=start)
        for n, agent in enumerate(["curator", "planner", "curator", "planner"]):
            await crm.data(
                INGEST, {"input": {"content": f"note {n}", "lane": "notes"}}, minted[agent]
            )
        got = await client.events("resumed", 2)
        await client.nothing("resumed", 0.5)
    assert [(e["actor"], e["kind"]) for e in got] == [("planner", "sr_ingested")] * 2
