"""Expiry end to end: a record given `expiresAt` (or its lane's ttl) is treated as retired
by every read from that instant, on both paths and over MCP, counts included, before
the gateway writes its tombstone; the sweep then writes it (actor edgeloom, reason
expired) for the feed's subscribers. The reads' clock is moved by replacing
`edgeloom_now()` (migration 0030), so nothing waits for the real time to pass."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from store.kinds.record.expiry import sweep
from tests.conftest import GatewayFactory
from tests.gql._api import AUDIT, RECORD, RESTORE_RECORD, RETIRE_RECORD, unique
from tests.gql._differential import compiled_path
from tests.gql._edges import edges, upsert
from tests.gql._feed import feed_client, newest_cursor
from tests.gql._mcp import call, over_http
from tests.gql._policy_support import mint
from tests.gql.test_retire import ordinary_path
from tests.gql.test_watch import WATCH, changes
from tests.support import Gateway, assert_verified

POLICY = """
lanes:
  notes: {}
  brief: { ttl: 12h }
agents:
  writer: { read: [notes, brief], write: [notes, brief] }
  reader: { read: [notes, brief], write: [] }
  outsider: { read: [], write: [] }
"""

READS = """
query($id: ID!, $match: [String!]!, $property: String!, $label: String!, $asOf: DateTime,
      $word: String!) {
  records(first: 500) { totalCount items { id } }
  gather(match: $match, asOf: $asOf) { totalCount items { id content } }
  union: gather(match: $match, mode: UNION, asOf: $asOf) { totalCount items { id } }
  edgeProperty(property: $property, asOf: $asOf) {
    memberCount members(first: 50) { totalCount items { id } } }
  labels(asOf: $asOf) { label recordCount }
  values(label: $label) { items { value memberCount } }
  one: record(id: $id, asOf: $asOf) { id }
  traverse(from: $id, asOf: $asOf) { items { record { id } } }
  search(text: $word, asOf: $asOf, syntax: STRICT) { totalCount items { record { id } } }
}
"""

INGEST = """
mutation($input: IngestInput!) { ingest(input: $input) { id expiresAt createdAt } }
"""
UPDATE_EXPIRY = """
mutation($id: ID!, $at: DateTime, $now: Boolean) {
  update(id: $id, expiresAt: $at, expireNow: $now) { id version expiresAt } }
"""


@pytest.fixture(scope="module")
async def env(start_gateway: GatewayFactory) -> tuple[Gateway, dict[str, str]]:
    # No sweep of its own: each test writes the tombstones when it says so.
    gateway = await start_gateway(policy_yaml=POLICY, expiry_seconds=0)
    return gateway, await mint(gateway, "writer", "reader", "outsider")


@asynccontextmanager
async def clock(gateway: Gateway, at: datetime) -> AsyncIterator[None]:
    """Every read of the block (and the sweep) takes `at` for now."""
    conn = await asyncpg.connect(gateway.database_url)
    try:
        await conn.execute(
            "CREATE OR REPLACE FUNCTION edgeloom_now() RETURNS timestamptz LANGUAGE sql "
            f"STABLE PARALLEL SAFE AS $$ SELECT '{at.isoformat()}'::timestamptz $$"
        )
        yield
    finally:
        await conn.execute(
            "CREATE OR REPLACE FUNCTION edgeloom_now() RETURNS timestamptz LANGUAGE sql "
            "STABLE PARALLEL SAFE AS $$ SELECT now() $$"
        )
        await conn.close()


async def write(
    gateway: Gateway, token: str, content: str, props: list[str], **fields: Any
) -> dict[str, Any]:
    given = {"content": content, "lane": "notes", "properties": props, **fields}
    data = await gateway.data(INGEST, {"input": given}, token)
    return dict(data["ingest"])


async def swept(gateway: Gateway) -> list[str]:
    services = (gateway.state or {})["services"]
    return await sweep(services.pool, services.executor)


def shown(seen: dict[str, Any], label: str) -> dict[str, Any]:
    """What each read shows, by read: ids and counts."""
    return {
        "records": (seen["records"]["totalCount"], {r["id"] for r in seen["records"]["items"]}),
        "gather": (seen["gather"]["totalCount"], {r["id"] for r in seen["gather"]["items"]}),
        "union": (seen["union"]["totalCount"], {r["id"] for r in seen["union"]["items"]}),
        "memberCount": seen["edgeProperty"]["memberCount"],
        "members": {r["id"] for r in seen["edgeProperty"]["members"]["items"]},
        "labels": {c["label"]: c["recordCount"] for c in seen["labels"]}.get(label),
        "values": {v["value"]: v["memberCount"] for v in seen["values"]["items"]},
        "one": seen["one"],
        "traverse": {i["record"]["id"] for i in seen["traverse"]["items"]},
        "search": {i["record"]["id"] for i in seen["search"]["items"]},
    }


async def both_paths(gateway: Gateway, variables: dict[str, Any], token: str) -> dict[str, Any]:
    """The reads, answered the same by the compiled path (which must answer) and by the
    resolvers."""
    path = compiled_path(gateway)
    answered = path.answered
    compiled = await gateway.data(READS, variables, token)
    assert compiled_path(gateway).answered > answered
    with ordinary_path(gateway):
        plain = await gateway.data(READS, variables, token)
    assert compiled == plain
    return compiled


async def test_an_expired_record_is_retired_by_every_read_at_its_instant(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    writer, reader = tokens["writer"], tokens["reader"]
    org, label, word = f"org:{unique()}", unique("l"), unique("w")
    expires = datetime.now(UTC) + timedelta(hours=1)
    kept = await write(gateway, writer, f"kept {word}", [org, f"{label}:a"])
    going = await write(
        gateway, writer, f"going {word}", [org, f"{label}:a"], expiresAt=expires.isoformat()
    )
    assert going["expiresAt"] == expires.isoformat() and kept["expiresAt"] is None
    tied = await write(gateway, writer, f"tied {word}", [f"{label}:b"])
    group = 'mutation($ids: [ID!]!) { group(recordIds: $ids, hint: "t") { id } }'
    await gateway.data(group, {"ids": [kept["id"], going["id"], tied["id"]]}, writer)
    namespace = unique("ns")
    into = await upsert(
        gateway, writer, fromId=kept["id"], toId=going["id"], type="cites", namespace=namespace
    )
    out = await upsert(
        gateway, writer, fromId=going["id"], toId=tied["id"], type="cites", namespace=namespace
    )
    kept_edge = await upsert(
        gateway, writer, fromId=kept["id"], toId=tied["id"], type="cites", namespace=namespace
    )
    variables = {
        "id": kept["id"],
        "match": [org],
        "property": org,
        "label": label,
        "asOf": None,
        "word": word,
    }
    ids = {kept["id"], going["id"]}

    async with clock(gateway, expires - timedelta(seconds=1)):
        before = shown(await both_paths(gateway, variables, reader), label)
        listed = await edges(gateway, reader, namespace=namespace)
        assert {e["id"] for e in listed["items"]} == {into["id"], out["id"], kept_edge["id"]}
    assert before["records"][0] >= 3 and before["gather"] == (2, ids)
    assert before["memberCount"] == 2 and before["labels"] == 3
    assert before["values"] == {"a": 2, "b": 1} and going["id"] in before["traverse"]
    assert before["search"] == {kept["id"], going["id"], tied["id"]}

    # One second past its instant, no sweep yet: gone from every read, counts included.
    async with clock(gateway, expires + timedelta(seconds=1)):
        after = shown(await both_paths(gateway, variables, reader), label)
        assert after["records"] == (before["records"][0] - 1, before["records"][1] - {going["id"]})
        assert after["gather"] == after["union"] == (1, {kept["id"]})
        assert after["memberCount"] == 1 and after["members"] == {kept["id"]}
        assert after["labels"] == 2 and after["values"] == {"a": 1, "b": 1}
        assert after["traverse"] == before["traverse"] - {going["id"]} == {tied["id"]}
        assert after["search"] == {kept["id"], tied["id"]}
        # Read as of a second before its instant, it is there as it was.
        then = variables | {"asOf": (expires - timedelta(seconds=1)).isoformat()}
        at_then = shown(await both_paths(gateway, then, reader), label)
        for read in ("gather", "union", "memberCount", "members", "labels", "search"):
            assert at_then[read] == before[read], read
        # ... and as of a second after it, not (no tombstone is written yet).
        later = variables | {"asOf": (expires + timedelta(seconds=1)).isoformat()}
        at_later = shown(await both_paths(gateway, later, reader), label)
        for read in ("gather", "union", "memberCount", "members", "labels", "search"):
            assert at_later[read] == after[read], read

        # A typed edge to or from it is gone with it, the expired ones shown too.
        for expired in (False, True):
            listed = await edges(gateway, reader, namespace=namespace, includeExpired=expired)
            assert [e["id"] for e in listed["items"]] == [kept_edge["id"]]
            assert listed["totalCount"] == 1

        # record(id) says it is retired: at its instant, by the engine, expired.
        error = await gateway.error(RECORD, {"id": going["id"]}, reader)
        assert error["extensions"]["code"] == "NOT_FOUND"
        assert error["extensions"]["retired"] == {
            "at": expires.isoformat(),
            "actor": "edgeloom",
            "reason": "expired",
        }
        # Over MCP too.
        async with over_http(gateway, reader) as session:
            found = await call(session, "e_gather", action="intersect", match=[org])
            assert {r["id"] for r in found["items"]} == {kept["id"]}
            hits = await call(session, "e_search", text=word)
            assert going["id"] not in str(hits) and kept["id"] in str(hits)

        # The sweep writes the tombstone; its subscribers hear of it; no read moves.
        async with feed_client(gateway, reader) as feed:
            await feed.subscribe("f", kinds=["sr_retired", "edge_retired"])
            await feed.subscribe("w", WATCH, match=[org], initial=False)
            await feed.nothing("f", 0.3)
            assert await swept(gateway) == [going["id"]]
            got = await feed.events("f", 3)
            [left] = await changes(feed, "w", 1)
        event = next(e for e in got if e["kind"] == "sr_retired")
        assert (event["recordId"], event["actor"], event["payload"]) == (
            going["id"],
            "edgeloom",
            {"reason": "expired"},
        )
        # Its typed edges are retired with it, in the same transaction.
        assert {e["payload"]["edgeId"] for e in got if e["kind"] == "edge_retired"} == {
            into["id"],
            out["id"],
        }
        assert (left["change"], left["record"]["id"]) == ("LEFT", going["id"])
        assert left["record"]["retired"] == {"actor": "edgeloom", "reason": "expired"}
        assert await swept(gateway) == []
        assert shown(await both_paths(gateway, variables, reader), label) == after
    # Back to the real clock, before its instant: retired, by its tombstone now.
    again_now = shown(await both_paths(gateway, variables, reader), label)
    assert again_now == after
    events = await gateway.data(AUDIT, {"recordId": going["id"], "kinds": ["sr_retired"]}, reader)
    [tombstone] = events["audit"]["items"]
    assert (tombstone["actor"], tombstone["payload"]) == ("edgeloom", {"reason": "expired"})
    await assert_verified(gateway.database_url)


async def test_an_update_with_a_later_expiry_or_a_restore_extends_it(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    writer = tokens["writer"]
    org = f"org:{unique()}"
    first = datetime.now(UTC) + timedelta(hours=1)
    record = await write(gateway, writer, "extended", [org], expiresAt=first.isoformat())
    later = first + timedelta(hours=1)
    written = datetime.now(UTC)
    updated = (
        await gateway.data(UPDATE_EXPIRY, {"id": record["id"], "at": later.isoformat()}, writer)
    )["update"]
    assert updated["expiresAt"] == later.isoformat() and updated["version"] == 2
    # Each version shows the expiry it had, on both paths.
    at = "query($id: ID!, $asOf: DateTime) { record(id: $id, asOf: $asOf) { version expiresAt } }"
    for as_of, version, expiry in ((written, 1, first), (None, 2, later)):
        variables = {"id": record["id"], "asOf": None if as_of is None else as_of.isoformat()}
        answered = compiled_path(gateway).answered
        compiled = (await gateway.data(at, variables, writer))["record"]
        assert compiled_path(gateway).answered > answered
        with ordinary_path(gateway):
            plain = (await gateway.data(at, variables, writer))["record"]
        assert compiled == plain == {"version": version, "expiresAt": expiry.isoformat()}
    # An update that names no expiry keeps it.
    content = 'mutation($id: ID!) { update(id: $id, content: "more") { expiresAt } }'
    kept = (await gateway.data(content, {"id": record["id"]}, writer))["update"]
    assert kept["expiresAt"] == later.isoformat()
    gather = "query($m: [String!]!) { gather(match: $m) { totalCount } }"
    async with clock(gateway, first + timedelta(seconds=1)):
        assert (await gateway.data(gather, {"m": [org]}, writer))["gather"]["totalCount"] == 1
    async with clock(gateway, later + timedelta(seconds=1)):
        assert (await gateway.data(gather, {"m": [org]}, writer))["gather"]["totalCount"] == 0
        assert await swept(gateway) == [record["id"]]
        # Restored, it no longer expires (its lane gives no lifetime).
        restored = (await gateway.data(RESTORE_RECORD, {"id": record["id"]}, writer))[
            "restoreRecord"
        ]
        assert restored["retired"] is None
        assert (await gateway.data(gather, {"m": [org]}, writer))["gather"]["totalCount"] == 1
    one = "query($id: ID!) { record(id: $id) { expiresAt } }"
    assert (await gateway.data(one, {"id": record["id"]}, writer))["record"]["expiresAt"] is None
    await assert_verified(gateway.database_url)


async def test_a_past_expiry_is_refused_unless_expiry_now_is_asked(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    writer = tokens["writer"]
    org = f"org:{unique()}"
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    refused = await gateway.error(
        INGEST, {"input": {"content": "x", "lane": "notes", "expiresAt": past}}, writer
    )
    assert refused["extensions"]["code"] == "BAD_USER_INPUT"
    assert "is not after now" in refused["message"] and "expireNow: true" in refused["message"]
    assert refused["extensions"]["allowed"] == ["an instant after now", "expireNow: true"]
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    both = {"content": "x", "lane": "notes", "expiresAt": future, "expireNow": True}
    contradicted = await gateway.error(INGEST, {"input": both}, writer)
    assert contradicted["extensions"]["code"] == "BAD_USER_INPUT"
    assert "expireNow expires the record at once" in contradicted["message"]

    record = await write(gateway, writer, "short-lived", [org])
    now = await gateway.data(UPDATE_EXPIRY, {"id": record["id"], "now": True, "at": past}, writer)
    at = datetime.fromisoformat(now["update"]["expiresAt"])
    assert at > datetime.fromisoformat(past)
    # Expired at once: gone from the next read, on the real clock (the clock writes are
    # decided by), before any sweep.
    gather = "query($m: [String!]!) { gather(match: $m) { totalCount } }"
    assert (await gateway.data(gather, {"m": [org]}, writer))["gather"]["totalCount"] == 0
    # Nothing writes it but restoring; retiring it says it is retired already.
    refused = await gateway.error(UPDATE_EXPIRY, {"id": record["id"], "at": future}, writer)
    assert refused["extensions"]["code"] == "NOT_FOUND" and "retired" in refused["message"]
    again = await gateway.error(RETIRE_RECORD, {"id": record["id"]}, writer)
    assert again["extensions"]["code"] == "CONFLICT" and "expired" in again["message"]
    assert again["extensions"]["retired"]["actor"] == "edgeloom"
    assert record["id"] in await swept(gateway)

    # The MCP tools take the same arguments.
    async with over_http(gateway, writer) as session:
        made = await call(
            session, "e_ingest", content="by mcp", assign_lane="notes", expires_at=future
        )
        assert made["expires_at"] == future
        ended = await call(session, "e_update", id=made["id"], expire_now=True)
        assert datetime.fromisoformat(ended["expires_at"]) < datetime.fromisoformat(future)
        refused_mcp = await session.call_tool("e_update", {"id": made["id"], "expires_at": future})
        assert refused_mcp.is_error and "retired" in str(refused_mcp.content)


async def test_a_lane_ttl_gives_new_records_their_lifetime(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    writer = tokens["writer"]
    record = await write(gateway, writer, "brief", [f"org:{unique()}"], lane="brief")
    created = datetime.fromisoformat(record["createdAt"])
    assert datetime.fromisoformat(record["expiresAt"]) == created + timedelta(hours=12)
    asked = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    many = "mutation($inputs: [IngestInput!]!) { ingestMany(inputs: $inputs) { id expiresAt } }"
    inputs = [
        {"content": "own", "lane": "brief", "expiresAt": asked},
        {"content": "forever", "lane": "notes"},
    ]
    own, forever = (await gateway.data(many, {"inputs": inputs}, writer))["ingestMany"]
    assert own["expiresAt"] == asked and forever["expiresAt"] is None
    async with clock(gateway, created + timedelta(hours=12, seconds=1)):
        error = await gateway.error(RECORD, {"id": record["id"]}, writer)
        assert error["extensions"]["retired"]["reason"] == "expired"
        assert set(await swept(gateway)) >= {record["id"], own["id"]}


async def test_the_gateway_writes_the_retirement_of_an_expired_record_by_itself(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(policy_yaml=POLICY, expiry_seconds=0.2)
    tokens = await mint(gateway, "writer", "reader")
    async with feed_client(gateway, tokens["reader"]) as feed:
        # From a cursor: the sweep may write before a live subscription would be armed.
        await feed.subscribe("f", kinds=["sr_retired"], after=await newest_cursor(gateway))
        record = await write(gateway, tokens["writer"], "at once", [], expireNow=True)
        [event] = await feed.events("f", 1)
    assert (event["recordId"], event["actor"]) == (record["id"], "edgeloom")
