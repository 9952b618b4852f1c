"""The auditEvents subscription over a real socket: order, exactly-once, filters, resume."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gql.server.settings import Settings
from store.ledger.registry import event_kinds
from tests.conftest import DEV, GatewayFactory
from tests.gql._api import INGEST, UPDATE, ingest, unique
from tests.gql._feed import FIELDS, feed_client, newest_cursor
from tests.gql._policy_support import APPLY, mint
from tests.support import Databases, Gateway, no_request_id, run_gateway, sql


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml)


async def audit_cursors(gateway: Gateway, after: str, token: str | None = None) -> list[str]:
    """Every readable event's cursor after `after`, from the audit query."""
    data = await gateway.data(
        "query($after: String) { audit(first: 500, after: $after) { items { cursor } } }",
        {"after": after},
        token,
    )
    return [item["cursor"] for item in data["audit"]["items"]]


async def test_every_event_arrives_once_in_feed_order(gateway: Gateway) -> None:
    start = await newest_cursor(gateway)
    topic = unique("topic:order-")
    async with feed_client(gateway) as client:
        await client.subscribe("1", after=start)
        await client.subscribe("2")  # live only, subscribed at the same time
        # Concurrent writers: their transactions commit in an order of their own.
        written = await asyncio.gather(*(ingest(gateway, f"order {n}", [topic]) for n in range(20)))
        replayed = await client.events("1", 20)
        await client.nothing("1", 0.5)
    expected = await audit_cursors(gateway, start)
    assert [e["cursor"] for e in replayed] == expected
    assert sorted(e["recordId"] for e in replayed) == sorted(r["id"] for r in written)
    cursors = [int(e["cursor"]) for e in replayed]
    assert cursors == sorted(cursors) and len(set(cursors)) == 20
    first = replayed[0]
    assert set(first) == set(FIELDS.split())
    assert (first["kind"], first["lane"], first["actor"]) == ("sr_ingested", "default", DEV)


async def test_live_subscribers_get_each_event_in_order(gateway: Gateway) -> None:
    async with feed_client(gateway) as client:
        await client.subscribe("live")
        # A live subscription starts from "now": wait until it demonstrably runs.
        probe = await ingest(gateway, "probe")
        while (await client.event("live"))["recordId"] != probe["id"]:
            pass
        records = await asyncio.gather(*(ingest(gateway, f"live {n}") for n in range(10)))
        got = await client.events("live", 10)
        await client.nothing("live", 0.3)
    assert sorted(e["recordId"] for e in got) == sorted(r["id"] for r in records)
    cursors = [int(e["cursor"]) for e in got]
    assert cursors == sorted(cursors)


async def test_lane_and_kind_filters(crm: Gateway) -> None:
    minted = await mint(crm, "curator", "planner")
    curator, planner = minted["curator"], minted["planner"]
    start = await newest_cursor(crm)
    async with feed_client(crm, planner) as client:
        await client.subscribe("notes", after=start, lanes=["notes"], kinds=["sr_ingested"])
        await client.subscribe("all", after=start)
        crm_record = (
            await crm.data(
                INGEST,
                {
                    "input": {
                        "content": "Call with Acme",
                        "lane": "crm",
                        "sourceType": "meeting",
                        "properties": ["org:Acme"],
                    }
                },
                curator,
            )
        )["ingest"]
        note = (await crm.data(INGEST, {"input": {"content": "a note", "lane": "notes"}}, planner))[
            "ingest"
        ]
        await crm.data(UPDATE, {"id": note["id"], "content": "a better note"}, planner)
        got = await client.event("notes")
        assert (got["recordId"], got["kind"], got["lane"]) == (note["id"], "sr_ingested", "notes")
        everything = await client.events("all", 3)
        assert [(e["recordId"], e["kind"]) for e in everything] == [
            (crm_record["id"], "sr_ingested"),
            (note["id"], "sr_ingested"),
            (note["id"], "sr_updated"),
        ]
        # the crm ingest and the update match the lanes or kinds of neither filter
        await client.nothing("notes", 1.0)


async def test_unknown_kinds_lanes_and_cursors_are_refused(crm: Gateway) -> None:
    planner = (await mint(crm, "planner"))["planner"]
    async with feed_client(crm, planner) as client:
        await client.subscribe("kinds", kinds=["sr_ingested", "record_deleted"])
        error = await client.error("kinds")
        assert error["message"] == (
            f"unknown event kind(s) ['record_deleted']; the kinds are {list(event_kinds())}"
        )
        assert no_request_id(error)["extensions"] == {
            "code": "BAD_USER_INPUT",
            "allowed": list(event_kinds()),
        }

        await client.subscribe("lanes", lanes=["notes", "secret"])
        error = await client.error("lanes")
        assert error["message"] == (
            "lane(s) ['secret'] are not readable by agent 'planner'; "
            "readable lanes: ['crm', 'notes']"
        )

        await client.subscribe("text", after="abc")
        error = await client.error("text")
        assert error["message"].startswith("cursor 'abc' is not a feed cursor")
        assert error["extensions"]["code"] == "BAD_USER_INPUT"

        newest = int(await newest_cursor(crm))
        await client.subscribe("future", after=str(newest + 1000))
        error = await client.error("future")
        assert error["message"] == (
            f"cursor '{newest + 1000}' is past the newest event in the feed "
            f"(cursor '{newest}'); pass the cursor of an event you received"
        )

        # A position no event holds (a rolled-back transaction took it).
        async with sql(crm.database_url) as conn:
            hole = await conn.fetchval("SELECT nextval('audit_events_seq_seq')")
        await ingest_note(crm, planner, "after the hole")
        await client.subscribe("hole", after=str(hole))
        error = await client.error("hole")
        assert error["message"] == (
            f"cursor '{hole}' names no event in the feed; pass the cursor of an event you received"
        )


async def ingest_note(gateway: Gateway, token: str, content: str) -> dict[str, Any]:
    record: dict[str, Any] = (
        await gateway.data(INGEST, {"input": {"content": content, "lane": "notes"}}, token)
    )["ingest"]
    return record


async def test_resume_replays_then_goes_live_without_gap_or_duplicate(gateway: Gateway) -> None:
    start = await newest_cursor(gateway)
    before = [await ingest(gateway, f"before {n}") for n in range(5)]
    cursors = await audit_cursors(gateway, start)
    assert len(cursors) == 5
    stop = asyncio.Event()
    written: list[str] = [r["id"] for r in before]

    async def keep_writing() -> None:
        n = 0
        while not stop.is_set():
            batch = await asyncio.gather(*(ingest(gateway, f"during {n}-{k}") for k in range(3)))
            written.extend(r["id"] for r in batch)
            n += 1

    writer = asyncio.create_task(keep_writing())
    try:
        await asyncio.sleep(0.2)
        async with feed_client(gateway) as client:
            # Resume after the second event while writers keep committing: the seam
            # between replay and live falls among concurrent commits.
            await client.subscribe("resume", after=cursors[1])
            await asyncio.sleep(0.5)
            stop.set()
            await writer
            expected = await audit_cursors(gateway, cursors[1])
            got = await client.events("resume", len(expected), timeout=30)
            await client.nothing("resume", 1.0)
    finally:
        stop.set()
        await writer
    received = [e["cursor"] for e in got]
    assert len(received) == len(set(received)), "an event arrived twice"
    assert sorted(received, key=int) == expected
    assert {e["recordId"] for e in got} == set(written[2:])


async def test_resume_from_the_start_of_the_feed(start_gateway: GatewayFactory) -> None:
    gateway = await start_gateway(anonymous_agent=DEV)
    records = [await ingest(gateway, f"r{n}") for n in range(3)]
    async with feed_client(gateway) as client:
        await client.subscribe("all", after="0")
        got = await client.events("all", 4)
    # the development policy applied at start, then the three ingests
    assert [e["kind"] for e in got] == ["policy_applied"] + ["sr_ingested"] * 3
    assert got[0]["lane"] is None
    assert [e["recordId"] for e in got[1:]] == [r["id"] for r in records]


async def test_rights_are_those_in_force_at_delivery(crm: Gateway, crm_yaml: str) -> None:
    minted = await mint(crm, "curator", "planner")
    curator, planner = minted["curator"], minted["planner"]

    async def crm_ingest(content: str) -> dict[str, Any]:
        record: dict[str, Any] = (
            await crm.data(
                INGEST,
                {"input": {"content": content, "lane": "crm", "sourceType": "meeting"}},
                curator,
            )
        )["ingest"]
        return record

    start = await newest_cursor(crm)
    async with feed_client(crm, planner) as client:
        await client.subscribe("p", after=start)
        seen = await crm_ingest("visible to the planner")
        assert (await client.event("p"))["recordId"] == seen["id"]
        narrowed = crm_yaml.replace(
            "read: [crm, notes], write: [notes]", "read: [notes], write: [notes]"
        )
        try:
            await crm.data(APPLY, {"yaml": narrowed}, curator)
            applied = await client.event("p")
            assert (applied["kind"], applied["lane"]) == ("policy_applied", None)
            await crm_ingest("no longer visible to the planner")
            note = await ingest_note(crm, planner, "still visible")
            got = await client.event("p")
            assert got["recordId"] == note["id"], "the crm event must not arrive"
            await client.nothing("p", 0.5)
        finally:
            await crm.data(APPLY, {"yaml": crm_yaml}, curator)


async def test_a_revoked_token_ends_the_subscription(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    from gql.feed.hub import FeedOptions
    from store.database import create_engine
    from store.operations import tokens

    gateway = await start_gateway(policy_yaml=crm_yaml, feed=FeedOptions(token_recheck_seconds=0.3))
    engine = create_engine(gateway.database_url, pool_size=1)
    try:
        info, secret = await tokens.create(engine, "planner")
        async with feed_client(gateway, secret) as client:
            await client.subscribe("p", after=await newest_cursor(gateway))
            note = await ingest_note(gateway, secret, "before revocation")
            assert (await client.event("p"))["recordId"] == note["id"]
            await tokens.revoke(engine, info.id)
            # No event needed: the token is re-checked while the stream is idle too.
            error = await client.error("p", timeout=5)
    finally:
        await engine.dispose()
    assert no_request_id(error)["extensions"] == {"code": "UNAUTHENTICATED"}
    assert error["message"].startswith("the bearer token is unknown or has been revoked")


async def test_a_revocation_nobody_notified_still_ends_the_subscription(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    """The periodic check is what remains when a revocation's notification never arrives
    (here the token is revoked by hand, without one)."""
    from gql.feed.hub import FeedOptions
    from store.database import create_engine
    from store.operations import tokens

    gateway = await start_gateway(policy_yaml=crm_yaml, feed=FeedOptions(token_recheck_seconds=0.3))
    engine = create_engine(gateway.database_url, pool_size=1)
    try:
        info, secret = await tokens.create(engine, "planner")
        async with feed_client(gateway, secret) as client:
            await client.subscribe("p", after=await newest_cursor(gateway))
            note = await ingest_note(gateway, secret, "before revocation")
            assert (await client.event("p"))["recordId"] == note["id"]
            async with sql(gateway.database_url) as conn:
                await conn.execute("UPDATE tokens SET revoked_at = now() WHERE id = $1", info.id)
            error = await client.error("p", timeout=5)
            code, _ = await asyncio.wait_for(client.closed, 5)
    finally:
        await engine.dispose()
    assert no_request_id(error)["extensions"] == {"code": "UNAUTHENTICATED"}
    assert code == 4403


async def test_a_socket_the_gateway_closes_on_revocation_logs_no_error(
    start_gateway: GatewayFactory, crm_yaml: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Closing a socket whose token was revoked is the gateway's decision, not a failure:
    its other operations, still running when it closes, end without an error line."""
    from gql.feed.hub import FeedOptions
    from store.database import create_engine
    from store.operations import tokens

    gateway = await start_gateway(policy_yaml=crm_yaml, feed=FeedOptions(token_recheck_seconds=0.3))
    engine = create_engine(gateway.database_url, pool_size=1)
    try:
        info, secret = await tokens.create(engine, "planner")
        with caplog.at_level(logging.WARNING):
            async with feed_client(gateway, secret) as client:
                after = await newest_cursor(gateway)
                for op in ("a", "b", "c"):
                    await client.subscribe(op, after=after)
                note = await ingest_note(gateway, secret, "before revocation")
                for op in ("a", "b", "c"):
                    assert (await client.event(op))["recordId"] == note["id"]
                await tokens.revoke(engine, info.id)
                code, _ = await asyncio.wait_for(client.closed, 5)
            await asyncio.sleep(0.5)  # what the server logs after the close
    finally:
        await engine.dispose()
    assert code == 4403
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == [], caplog.text


async def test_revoking_one_token_ends_only_its_subscription_and_the_rest_stay_direct(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    """The hub checks the tokens its subscribers hold and wakes only the one whose token
    was revoked; a subscriber whose token stays good goes on being served by the hub
    itself (`sent_directly`) across many recheck intervals."""
    from gql.feed.hub import FeedOptions
    from store.database import create_engine
    from store.operations import tokens

    gateway = await start_gateway(policy_yaml=crm_yaml, feed=FeedOptions(token_recheck_seconds=0.2))
    hub = gateway.state["services"].feed
    engine = create_engine(gateway.database_url, pool_size=1)
    try:
        revoked, revoked_secret = await tokens.create(engine, "planner")
        _, kept_secret = await tokens.create(engine, "planner")
        async with (
            feed_client(gateway, revoked_secret) as ended,
            feed_client(gateway, kept_secret) as kept,
        ):
            after = await newest_cursor(gateway)
            await ended.subscribe("p", after=after)
            await kept.subscribe("p", after=after)
            first = await ingest_note(gateway, kept_secret, "before revocation")
            assert (await kept.event("p"))["recordId"] == first["id"]
            assert (await ended.event("p"))["recordId"] == first["id"]
            await tokens.revoke(engine, revoked.id)
            error = await ended.error("p", timeout=5)
            assert no_request_id(error)["extensions"] == {"code": "UNAUTHENTICATED"}
            sent = hub.sent_directly
            for n in range(3):
                await asyncio.sleep(0.3)  # longer than a recheck interval
                note = await ingest_note(gateway, kept_secret, f"after revocation {n}")
                assert (await kept.event("p"))["recordId"] == note["id"]
            assert hub.sent_directly - sent == 3
    finally:
        await engine.dispose()


# -- transactions committing out of sequence order ------------------------------


@pytest.fixture(scope="module")
async def bare(databases: Databases) -> AsyncIterator[Gateway]:
    """A development gateway whose database also gets hand-made event rows.

    Those rows name no ledger entry, so this database is not verified.
    """
    url = await databases.create()
    async with run_gateway(Settings(database_url=url, anonymous_agent=DEV, pool_size=4)) as gw:
        yield gw


async def open_transaction_with_event(gateway: Gateway) -> tuple[Any, int, str]:
    """Transaction A: takes its seq now, as the write path does, and stays open."""
    import asyncpg

    from tests.support import plain

    conn = await asyncpg.connect(plain(gateway.database_url))
    transaction = conn.transaction()
    await transaction.start()
    # The write path's first statement: share-lock the policy head (assigns the xid).
    await conn.execute("SELECT version FROM policy_head WHERE id = 1 FOR SHARE")
    record_id = "sr_" + uuid.uuid4().hex
    seq = await conn.fetchval(
        """INSERT INTO audit_events (id, kind, record_id, lane, actor, at, payload,
                                     version_before, version_after, object_kind, object_id)
           VALUES ($1, 'sr_ingested', $2, 'default', 'dev', now(), '{}'::jsonb,
                   NULL, 1, 'record', $2)
           RETURNING seq""",
        "ev_" + uuid.uuid4().hex,
        record_id,
    )
    return (conn, transaction), seq, record_id


@pytest.mark.parametrize("hold", [0.3, 1.6])
async def test_an_earlier_seq_committing_later_is_delivered(bare: Gateway, hold: float) -> None:
    """A takes seq N, B takes N+1 and commits, then A commits: both arrive, once.

    Committed within the feed's ordering wait (1 s), A arrives first, in seq order;
    held longer, B is not held back beyond the wait and A arrives after it.
    """
    async with feed_client(bare) as client:
        await client.subscribe("live", after=await newest_cursor(bare))
        # Once the probe arrives the subscription is past its replay and live.
        probe = await ingest(bare, "probe")
        start = (await client.event("live"))["cursor"]
        assert int(start) == int(await newest_cursor(bare)) and probe
        (conn, transaction), seq_a, record_a = await open_transaction_with_event(bare)
        try:
            record_b = await ingest(bare, "B commits first")
            await asyncio.sleep(hold)
            await transaction.commit()
        finally:
            await conn.close()
        got = await client.events("live", 2)
        await client.nothing("live", 0.5)
        # A resumed subscriber (from before both) gets both from the table.
        await client.subscribe("resumed", after=start)
        replayed = await client.events("resumed", 2)
    by_record = {e["recordId"]: int(e["cursor"]) for e in got}
    assert by_record == {record_a: seq_a, record_b["id"]: seq_a + 1}
    order = [e["recordId"] for e in got]
    assert order == ([record_a, record_b["id"]] if hold < 1 else [record_b["id"], record_a])
    assert [e["recordId"] for e in replayed] == [record_a, record_b["id"]]


async def test_a_resume_taken_while_a_transaction_is_open_gets_it_later(bare: Gateway) -> None:
    start = await newest_cursor(bare)
    (conn, transaction), seq_a, record_a = await open_transaction_with_event(bare)
    try:
        record_b = await ingest(bare, "B, committed before the resume")
        async with feed_client(bare) as client:
            # The replay's snapshot sees B but not A; A must come live, once.
            await client.subscribe("resumed", after=start)
            first = await client.event("resumed")
            assert first["recordId"] == record_b["id"]
            await transaction.commit()
            second = await client.event("resumed")
            await client.nothing("resumed", 0.5)
    finally:
        await conn.close()
    assert (second["recordId"], int(second["cursor"])) == (record_a, seq_a)
