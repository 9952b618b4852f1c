"""watch over a real socket: the current members as JOINED, then records joining, changing
on and leaving the gather live, and a resume from a cursor with no gap."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.gql._api import ADD, REMOVE, RESTORE_RECORD, RETIRE_RECORD, UPDATE, ingest, unique
from tests.gql._edges import RETIRE as RETIRE_EDGE
from tests.gql._edges import upsert
from tests.gql._feed import FeedClient, feed_client, no_transaction_waits, watch_idly
from tests.support import Gateway

WATCH = """
subscription($match: [String!]!, $mode: GatherMode, $initial: Boolean, $after: String) {
  watch(match: $match, mode: $mode, initial: $initial, after: $after) {
    change cursor record { id content properties version retired { actor reason } }
  }
}
"""


async def changes(client: FeedClient, op: str, count: int) -> list[dict[str, Any]]:
    got = []
    for _ in range(count):
        message = await client.message(op)
        assert message["type"] == "next" and "errors" not in message["payload"], message
        got.append(message["payload"]["data"]["watch"])
    return got


def told(found: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(c["change"], c["record"]["id"], c["record"]["content"]) for c in found]


async def test_watch_starts_with_the_members_then_follows_the_gather(gateway: Gateway) -> None:
    project, team = unique("project:"), unique("team:")
    first = await ingest(gateway, "first", [project])
    second = await ingest(gateway, "second", [project, team])
    await ingest(gateway, "elsewhere", [team])
    async with feed_client(gateway) as client:
        await client.subscribe("w", WATCH, match=[project], initial=True)
        await client.subscribe("both", WATCH, match=[project, team], initial=True)
        members = await changes(client, "w", 2)
        assert sorted(told(members)) == sorted(
            [("JOINED", first["id"], "first"), ("JOINED", second["id"], "second")]
        )
        assert len({m["cursor"] for m in members}) == 1
        assert told(await changes(client, "both", 1)) == [("JOINED", second["id"], "second")]

        third = await ingest(gateway, "third", [project])
        await gateway.data(UPDATE, {"id": first["id"], "content": "first, revised"})
        await gateway.data(REMOVE, {"id": second["id"], "properties": [project]})
        await ingest(gateway, "not on it", [unique("project:")])
        await gateway.data(ADD, {"id": third["id"], "properties": [team]})
        live = await changes(client, "w", 4)
        both = await changes(client, "both", 2)
        await client.nothing("w", 0.5)
        await client.nothing("both", 0.3)
    assert told(live) == [
        ("JOINED", third["id"], "third"),
        ("CHANGED", first["id"], "first, revised"),
        ("LEFT", second["id"], "second"),
        ("CHANGED", third["id"], "third"),
    ]
    # The record as the change left it: the member that left no longer carries it.
    assert project not in live[2]["record"]["properties"]
    assert told(both) == [("LEFT", second["id"], "second"), ("JOINED", third["id"], "third")]

    # A resume from the members' cursor, or from any change's, misses nothing.
    async with feed_client(gateway) as client:
        await client.subscribe("all", WATCH, match=[project], after=members[0]["cursor"])
        await client.subscribe("rest", WATCH, match=[project], after=live[1]["cursor"])
        assert await changes(client, "all", 4) == live
        assert await changes(client, "rest", 2) == live[2:]
        await client.nothing("all", 0.3)


async def test_watch_refuses_initial_with_a_cursor(gateway: Gateway) -> None:
    async with feed_client(gateway) as client:
        await client.subscribe("w", WATCH, match=["project:x"], initial=True, after="0")
        error = await client.error("w")
    assert error["message"] == (
        "watch takes initial: true (start from the current members) or after (resume "
        "from a cursor), not both"
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"


async def test_a_retired_member_leaves_and_a_restored_one_joins_again(gateway: Gateway) -> None:
    project = unique("project:")
    kept = await ingest(gateway, "kept", [project])
    gone = await ingest(gateway, "retired later", [project])
    async with feed_client(gateway) as client:
        await client.subscribe("w", WATCH, match=[project], initial=True)
        assert len(await changes(client, "w", 2)) == 2
        await gateway.data(RETIRE_RECORD, {"id": gone["id"], "reason": "wrong"})
        await gateway.data(RESTORE_RECORD, {"id": gone["id"]})
        live = await changes(client, "w", 2)
        await client.nothing("w", 0.3)
    # Told as its tombstone left it (a retired record reads as absent), then as restored.
    assert told(live) == [
        ("LEFT", gone["id"], "retired later"),
        ("JOINED", gone["id"], "retired later"),
    ]
    assert live[0]["record"]["version"] == 2 and live[1]["record"]["version"] == 3
    assert live[0]["record"]["retired"] == {"actor": "dev", "reason": "wrong"}
    assert live[1]["record"]["retired"] is None
    assert kept["id"] not in {c["record"]["id"] for c in live}


async def test_one_write_is_one_change_per_record(gateway: Gateway) -> None:
    project = unique("project:")
    earlier = await ingest(gateway, "price is 10", [project])
    async with feed_client(gateway) as client:
        await client.subscribe("w", WATCH, match=[project], initial=True)
        assert told(await changes(client, "w", 1)) == [("JOINED", earlier["id"], "price is 10")]
        # One write: sr_ingested and adjusted for the new record, adjusted for the other.
        later = await ingest(gateway, "price is 12", [project], adjusts=[earlier["id"]])
        live = await changes(client, "w", 2)
        await client.nothing("w", 0.5)
    assert told(live) == [
        ("JOINED", later["id"], "price is 12"),
        ("CHANGED", earlier["id"], "price is 10"),
    ]
    assert [c["record"]["version"] for c in live] == [1, 2]
    # A resume after the first change does not tell the rest of its write again.
    async with feed_client(gateway) as client:
        await client.subscribe("r", WATCH, match=[project], after=live[0]["cursor"])
        assert await changes(client, "r", 1) == live[1:]
        await client.nothing("r", 0.3)


async def test_typed_edges_are_not_told_as_changes(gateway: Gateway) -> None:
    project = unique("project:")
    a = await ingest(gateway, "a", [project])
    b = await ingest(gateway, "b", [project])
    async with feed_client(gateway) as client:
        await client.subscribe("w", WATCH, match=[project], initial=True)
        assert len(await changes(client, "w", 2)) == 2
        edge = await upsert(gateway, fromId=a["id"], toId=b["id"], type="supports")
        await upsert(gateway, fromId=a["id"], toId=b["id"], type="supports", weight=0.5)
        await gateway.data(RETIRE_EDGE, {"id": edge["id"]})
        await gateway.data(UPDATE, {"id": b["id"], "content": "b, revised"})
        # The record's own change comes; the edge's three events never did.
        assert told(await changes(client, "w", 1)) == [("CHANGED", b["id"], "b, revised")]
        await client.nothing("w", 0.3)


async def test_watches_waiting_on_an_empty_gather_hold_no_connection(gateway: Gateway) -> None:
    # More idle watches than the read pool (of 4 in the tests) has connections.
    project = unique("project:")
    async with watch_idly(gateway, None, [project], 6) as client:
        await no_transaction_waits(gateway)
        # Another client reads, on the compiled path and the ordinary one, and a new
        # socket is acknowledged: none of them waits for a connection a watch holds.
        await asyncio.wait_for(gateway.data("{ records(first: 1) { totalCount } }"), 5)
        await asyncio.wait_for(gateway.data("{ labels { label } }"), 5)
        async with asyncio.timeout(5), feed_client(gateway):
            pass
        joined = await ingest(gateway, "the first member", [project])
        for n in range(6):
            assert told(await changes(client, f"w{n}", 1)) == [
                ("JOINED", joined["id"], "the first member")
            ]
