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

from gql.feed_hub import FeedHub, FeedOptions
from tests.conftest import DEV, GatewayFactory
from tests.gql._api import INGEST_MANY, ingest, unique
from tests.gql._feed import PROTOCOL, TIMEOUT
from tests.support import Gateway

DOCUMENT = "subscription { auditEvents { id cursor kind recordId lane actor at payload } }"
MEMBERS = 4


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


def hub(gateway: Gateway) -> FeedHub:
    assert gateway.state is not None
    found: FeedHub = gateway.state["services"].feed
    return found


async def test_every_member_gets_the_same_bytes_as_the_ordinary_send(
    start_gateway: GatewayFactory,
) -> None:
    grouped = await start_gateway(anonymous_agent=DEV)
    plain = await start_gateway(
        anonymous_agent=DEV,
        database_url=grouped.database_url,
        feed=FeedOptions(group_writes=False),
    )
    topic = unique("topic:group-")
    async with AsyncExitStack() as stack:
        sockets = [
            await stack.enter_async_context(member(gateway))
            for gateway in (grouped, plain)
            for _ in range(MEMBERS)
        ]
        # Live on every socket: a probe each reaches (subscribing takes a moment).
        for _ in range(40):
            probe = await ingest(grouped, "probe", [topic])
            try:
                await asyncio.gather(*(texts_until(ws, probe["id"]) for ws in sockets))
                break
            except TimeoutError:
                continue
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
