"""The feed's socket behaviour: close codes, the one protocol served, and slow subscribers."""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import AsyncExitStack
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from gql.feed.hub import FeedOptions
from gql.server.settings import Settings
from tests.conftest import DEV, GatewayFactory
from tests.gql._api import ingest
from tests.gql._feed import FEED, PROTOCOL, TIMEOUT, feed_client, newest_cursor, small_buffer_socket
from tests.support import Databases, Gateway, no_request_id, run_gateway


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml)


async def closed_with(ws: Any) -> int:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            await asyncio.wait_for(ws.recv(), TIMEOUT)
    assert closed.value.rcvd is not None
    code: int = closed.value.rcvd.code
    return code


async def test_subscribing_before_the_ack_closes_with_4401(gateway: Gateway) -> None:
    async with connect(gateway.ws_url, subprotocols=[PROTOCOL], open_timeout=TIMEOUT) as ws:
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": FEED}}))
        assert await closed_with(ws) == 4401


async def test_a_bad_token_closes_with_4403(crm: Gateway) -> None:
    async with connect(crm.ws_url, subprotocols=[PROTOCOL], open_timeout=TIMEOUT) as ws:
        await ws.send(
            json.dumps({"type": "connection_init", "payload": {"authorization": "Bearer elt_nope"}})
        )
        assert await closed_with(ws) == 4403


async def test_a_second_subscription_with_one_id_closes_with_4409(gateway: Gateway) -> None:
    async with feed_client(gateway) as client:
        await client.subscribe("same")
        await client.subscribe("same")
        code, _ = await asyncio.wait_for(client.closed, TIMEOUT)
    assert code == 4409


async def test_the_legacy_graphql_ws_protocol_is_refused(
    crm: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    """Only graphql-transport-ws is served: a client offering nothing else is closed with
    4406, cleanly, and one offering both gets graphql-transport-ws."""
    async with connect(crm.ws_url, subprotocols=["graphql-ws"], open_timeout=TIMEOUT) as ws:
        assert ws.subprotocol is None
        assert await closed_with(ws) == 4406
    assert ws.close_reason == "Subprotocol not acceptable"
    async with connect(
        crm.ws_url, subprotocols=["graphql-ws", PROTOCOL], open_timeout=TIMEOUT
    ) as ws:
        assert ws.subprotocol == PROTOCOL
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


BIG = "x" * 200_000
HEAVY = """
subscription($after: String) { auditEvents(after: $after) { cursor recordId after { content } } }
"""


async def test_a_slow_subscriber_is_closed_and_resumes_without_loss(
    start_gateway: GatewayFactory,
) -> None:
    """A reader that stops reading fills its queue and is closed with its last cursor.

    Writers are not held up, another subscriber on the same gateway gets everything,
    and the slow one, resuming from the cursor it was told, gets the rest exactly.
    """
    gateway = await start_gateway(anonymous_agent=DEV, feed=FeedOptions(queue_batches=2))
    start = await newest_cursor(gateway)
    count = 30
    sock = small_buffer_socket(gateway.ws_url, 4096)
    async with (
        feed_client(gateway) as fast,
        # A client that reads nothing until told: at most one message queued, a
        # small receive buffer, and no compression, so the gateway's sends back up.
        connect(
            gateway.ws_url,
            subprotocols=[PROTOCOL],
            sock=sock,
            max_queue=1,
            max_size=None,
            compression=None,
            # Its paused reading holds the gateway's close frame behind what it never read:
            # the close waits out close_timeout (10 s by default) then drops the socket.
            close_timeout=0.5,
        ) as slow,
    ):
        await slow.send(json.dumps({"type": "connection_init", "payload": {}}))
        assert json.loads(await asyncio.wait_for(slow.recv(), TIMEOUT))["type"] == "connection_ack"
        await fast.subscribe("fast", after=start)
        await slow.send(
            json.dumps(
                {
                    "id": "slow",
                    "type": "subscribe",
                    "payload": {"query": HEAVY, "variables": {"after": start}},
                }
            )
        )
        written = []
        for n in range(count):
            written.append((await ingest(gateway, f"{n} {BIG}"))["id"])
            await asyncio.sleep(0.06)  # one write per feed read: one batch each
        everything = await fast.events("fast", count)
        assert [e["recordId"] for e in everything] == written
        # Read the slow socket now: some events, then the close with its cursor.
        received: list[dict[str, Any]] = []
        while True:
            message = json.loads(await asyncio.wait_for(slow.recv(), TIMEOUT))
            assert message["id"] == "slow"
            if "errors" in message["payload"]:
                break
            received.append(message["payload"]["data"]["auditEvents"])
        [error] = message["payload"]["errors"]
        assert len(received) < count
        last = received[-1]["cursor"] if received else start
        assert no_request_id(error)["extensions"] == {
            "code": "CONFLICT",
            "reason": "SLOW_SUBSCRIBER",
            "resumeAfter": last,
        }
        assert error["message"] == (
            "this subscription fell more than 2 batches behind the live feed and was closed; "
            f'subscribe again with after: "{last}" (the last event delivered) '
            "to resume without a gap"
        )
    async with feed_client(gateway) as again:
        await again.subscribe("rest", after=last)
        rest = await again.events("rest", count - len(received))
        await again.nothing("rest", 0.3)
    assert [e["recordId"] for e in received + rest] == written


@pytest.mark.parametrize("compression", [False, True])
async def test_websocket_compression_is_offered_only_when_asked_for(
    databases: Databases, compression: bool
) -> None:
    settings = Settings(database_url=await databases.create(), anonymous_agent=DEV, pool_size=2)
    async with AsyncExitStack() as stack:
        gw = await stack.enter_async_context(run_gateway(settings, ws_compression=compression))
        # The client offers permessage-deflate; the gateway takes it only when told to.
        ws = await stack.enter_async_context(
            connect(gw.ws_url, subprotocols=[PROTOCOL], open_timeout=TIMEOUT)
        )
        assert ws.response is not None
        offered = ws.response.headers.get("sec-websocket-extensions", "")
        assert ("permessage-deflate" in offered) is compression
        await ws.send(json.dumps({"type": "connection_init", "payload": {}}))
        ack = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
        assert ack["type"] == "connection_ack"
