"""A group's messages written as frames built once, from the hub's loop, to every member.

Two gateways on one database: one writes a group's frames straight to each member's
transport (the default), the other sends each message through the socket's ordinary send.
Every member of either must receive exactly the same bytes, message for message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from websockets.asyncio.client import ClientConnection, connect

from gql.feed.hub import FeedHub, FeedOptions
from tests.conftest import DEV, GatewayFactory
from tests.gql._api import INGEST_MANY, ingest, unique
from tests.gql._feed import PROTOCOL, TIMEOUT
from tests.support import Gateway

PROBE_S = 1.0

DOCUMENT = "subscription { auditEvents { id cursor kind recordId lane actor at payload } }"
MEMBERS = 4


async def live(gateway: Gateway, properties: list[str], sockets: list[ClientConnection]) -> None:
    """Probes until every socket gets one: a subscription is live some moments after its
    subscribe, and a probe written before then never comes. A missed probe costs PROBE_S,
    not TIMEOUT (cancelling recv loses nothing; a probe that comes late is read before
    the next one, in the feed's order)."""
    for _ in range(40):
        probe = await ingest(gateway, "probe", properties)
        reads = (texts_until(ws, probe["id"]) for ws in sockets)
        try:
            await asyncio.wait_for(asyncio.gather(*reads), PROBE_S)
            return
        except TimeoutError:
            continue
    raise AssertionError("a socket never got a probe")


@asynccontextmanager
async def member(gateway: Gateway) -> AsyncIterator[ClientConnection]:
    """A socket running the group's operation under the id every member uses."""
    async with connect(gateway.ws_url, subprotocols=[PROTOCOL], open_timeout=TIMEOUT) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": {}}))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        subscribe = {"id": "1", "type": "subscribe", "payload": {"query": DOCUMENT}}
        await ws.send(json.dumps(subscribe))
        yield ws


async def texts_until(ws: ClientConnection, record_id: str) -> list[str]:
    """Every message (its exact text) up to and including the one about `record_id`."""
    got: list[str] = []
    while True:
        text = await asyncio.wait_for(ws.recv(), TIMEOUT)
        assert isinstance(text, str)
        got.append(text)
        if json.loads(text)["payload"]["data"]["auditEvents"]["recordId"] == record_id:
            return got


@asynccontextmanager
async def members_of_both(
    start_gateway: GatewayFactory, topic: str
) -> AsyncIterator[tuple[Gateway, Gateway, list[ClientConnection]]]:
    """A gateway writing group frames and one sending each message the ordinary way, on
    one database, with `MEMBERS` members on each (first the grouped one's), all live."""
    grouped = await start_gateway(anonymous_agent=DEV)
    plain = await start_gateway(
        anonymous_agent=DEV,
        database_url=grouped.database_url,
        feed=FeedOptions(group_writes=False),
    )
    async with AsyncExitStack() as stack:
        sockets = [
            await stack.enter_async_context(member(gateway))
            for gateway in (grouped, plain)
            for _ in range(MEMBERS)
        ]
        await live(grouped, [topic], sockets)
        yield grouped, plain, sockets


def hub(gateway: Gateway) -> FeedHub:
    assert gateway.state is not None
    found: FeedHub = gateway.state["services"].feed
    return found


async def test_every_member_gets_the_same_bytes_as_the_ordinary_send(
    start_gateway: GatewayFactory,
) -> None:
    topic = unique("topic:group-")
    async with members_of_both(start_gateway, topic) as (grouped, plain, sockets):
        before = {
            name: (hub(g).sent_directly, hub(g).group_writes)
            for name, g in (("grouped", grouped), ("plain", plain))
        }
        await ingest(grouped, "one", [topic])
        await ingest(plain, "two", [topic])
        # Three events of one transaction: one read, one write per member.
        many = await grouped.data(
            INGEST_MANY,
            {"inputs": [{"content": f"many {n}", "properties": [topic]} for n in range(3)]},
        )
        last = many["ingestMany"][-1]["id"]
        received = await asyncio.gather(*(texts_until(ws, last) for ws in sockets))
    assert len(received[0]) == 5
    assert all(got == received[0] for got in received), "a member got other bytes"
    sent = hub(grouped).sent_directly - before["grouped"][0]
    writes = hub(grouped).group_writes - before["grouped"][1]
    # Written by the group path, several events in one write at least once.
    assert 0 < writes < sent
    assert hub(plain).group_writes == before["plain"][1] == 0


FOLLOW = """
subscription($m: [String!]) {
  auditEvents(match: $m) { id cursor kind recordId lane actor at payload after { content } }
}
"""


async def test_groups_following_other_records_render_alike(
    start_gateway: GatewayFactory,
) -> None:
    """Groups that differ only in `match` render from one batch of the read's events;
    each still gets exactly its own events, as executed for it alone."""
    shared = await start_gateway(anonymous_agent=DEV)
    alone = await start_gateway(
        anonymous_agent=DEV,
        database_url=shared.database_url,
        feed=FeedOptions(share_renderings=False),
    )
    a, b = unique("topic:a-"), unique("topic:b-")
    async with AsyncExitStack() as stack:
        sockets: dict[tuple[str, str], ClientConnection] = {}
        for name, gateway in (("shared", shared), ("alone", alone)):
            for topic in (a, b):
                ws = await stack.enter_async_context(
                    connect(gateway.ws_url, subprotocols=[PROTOCOL], open_timeout=TIMEOUT)
                )
                await ws.send(json.dumps({"type": "connection_init", "payload": {}}))
                assert json.loads(await ws.recv())["type"] == "connection_ack"
                payload = {"query": FOLLOW, "variables": {"m": [topic]}}
                await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
                sockets[(name, topic)] = ws
        await live(shared, [a, b], list(sockets.values()))
        many = await shared.data(
            INGEST_MANY,
            {
                "inputs": [
                    {"content": "on a", "properties": [a]},
                    {"content": "on b", "properties": [b]},
                    {"content": "on both", "properties": [a, b]},
                ]
            },
        )
        last = many["ingestMany"][-1]["id"]
        got = {key: await texts_until(ws, last) for key, ws in sockets.items()}
    ids = [r["id"] for r in many["ingestMany"]]
    for topic, mine in ((a, [ids[0], ids[2]]), (b, [ids[1], ids[2]])):
        assert got[("shared", topic)] == got[("alone", topic)]
        seen = [
            json.loads(t)["payload"]["data"]["auditEvents"]["recordId"]
            for t in got[("shared", topic)]
        ]
        assert seen == mine


async def test_armed_members_are_disarmed_by_a_write_of_the_servers_own(
    start_gateway: GatewayFactory,
) -> None:
    """Once written to, a waiting member is armed: the next batch is one write to its
    transport and nothing else. Anything the server then writes to its socket itself
    (here an error for a second operation) disarms it at once, so no frame of the hub's
    overtakes it; the member is armed again at its next write, and every member still
    gets the reference's bytes."""
    topic = unique("topic:armed-")
    async with members_of_both(start_gateway, topic) as (grouped, plain, sockets):
        assert hub(grouped).armed == MEMBERS
        assert hub(plain).armed == 0
        armed_writes = hub(grouped).armed_writes
        one = await ingest(grouped, "one", [topic])
        first = await asyncio.gather(*(texts_until(ws, one["id"]) for ws in sockets))
        assert hub(grouped).armed_writes - armed_writes == MEMBERS
        touched = sockets[0]
        await touched.send(
            json.dumps({"id": "2", "type": "subscribe", "payload": {"query": "{ nope }"}})
        )
        error = json.loads(await asyncio.wait_for(touched.recv(), TIMEOUT))
        assert (error["id"], error["type"]) == ("2", "error")
        assert hub(grouped).armed == MEMBERS - 1
        two = await ingest(grouped, "two", [topic])
        second = await asyncio.gather(*(texts_until(ws, two["id"]) for ws in sockets))
        assert hub(grouped).armed == MEMBERS
    for got in (first, second):
        assert all(texts == got[0] for texts in got), "a member got other bytes"


async def test_a_keepalive_ping_leaves_members_armed(start_gateway: GatewayFactory) -> None:
    """The server's keepalive pings (and pongs) are control frames: one may go out before
    or after any whole message, so it does not disarm a member as another write does.
    The client answers each ping, and the next batch is still one armed write each."""
    topic = unique("topic:pinged-")
    async with members_of_both(start_gateway, topic) as (grouped, _, sockets):
        feed = hub(grouped)
        assert feed.armed == MEMBERS
        pinged = [s.direct.raw for s in feed._subscribers if s.direct and s.direct.raw]
        assert len(pinged) == MEMBERS
        for raw in pinged:
            raw._protocol.send_keepalive_ping()  # what uvicorn's timer calls
        await asyncio.sleep(0.2)  # the pongs come back
        assert all(raw._protocol.pending_ping_payload is None for raw in pinged)
        assert feed.armed == MEMBERS
        armed_writes = feed.armed_writes
        one = await ingest(grouped, "one", [topic])
        got = await asyncio.gather(*(texts_until(ws, one["id"]) for ws in sockets))
        assert feed.armed_writes - armed_writes == MEMBERS
    assert all(texts == got[0] for texts in got), "a member got other bytes"
