"""The WebSocket handshake (graphql-transport-ws): a token in connection_init, or 4403."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from store.database import create_engine
from store.operations import tokens
from tests.conftest import GatewayFactory
from tests.gql._policy_support import APPLY, mint
from tests.support import Gateway, no_request_id

PROTOCOL = "graphql-transport-ws"
TIMEOUT = 10


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml)


async def receive(ws: ClientConnection) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
    return message


async def init(gateway: Gateway, payload: object = None) -> ClientConnection:
    """Open a socket and send connection_init (with `payload` unless it is None)."""
    ws = await connect(gateway.ws_url, subprotocols=[PROTOCOL], open_timeout=TIMEOUT)
    message: dict[str, object] = {"type": "connection_init"}
    if payload is not None:
        message["payload"] = payload
    await ws.send(json.dumps(message))
    return ws


async def assert_acked_as(gateway: Gateway, payload: object, agent: str) -> None:
    """The handshake is acknowledged and an operation on the socket runs as `agent`."""
    async with await init(gateway, payload) as ws:
        assert ws.subprotocol == PROTOCOL
        assert (await receive(ws))["type"] == "connection_ack"
        await ws.send(
            json.dumps(
                {"id": "1", "type": "subscribe", "payload": {"query": "{ profile { agent } }"}}
            )
        )
        result = await receive(ws)
        assert result == {
            "id": "1",
            "type": "next",
            "payload": {"data": {"profile": {"agent": agent}}},
        }, result
        assert (await receive(ws)) == {"id": "1", "type": "complete"}


async def assert_refused(gateway: Gateway, payload: object) -> None:
    """The server closes the socket with 4403 instead of acknowledging."""
    async with await init(gateway, payload) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await receive(ws)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4403


async def test_a_valid_token_is_acknowledged(crm: Gateway) -> None:
    minted = await mint(crm, "sales", "planner")
    for agent, token in minted.items():
        await assert_acked_as(crm, {"authorization": f"Bearer {token}"}, agent)


async def test_a_missing_or_bad_token_closes_with_4403(crm: Gateway) -> None:
    for payload in (
        None,
        {},
        {"authorization": ""},
        {"authorization": "Bearer elt_not-a-real-token"},
        {"authorization": "Basic dXNlcjpwYXNz"},
        {"token": "elt_whatever"},
    ):
        await assert_refused(crm, payload)


async def test_a_revoked_token_closes_with_4403(crm: Gateway) -> None:
    engine = create_engine(crm.database_url, pool_size=1)
    try:
        info, secret = await tokens.create(engine, "sales")
        await assert_acked_as(crm, {"authorization": f"Bearer {secret}"}, "sales")
        await tokens.revoke(engine, info.id)
    finally:
        await engine.dispose()
    await assert_refused(crm, {"authorization": f"Bearer {secret}"})


async def test_an_agent_not_in_the_policy_closes_with_4403(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(policy_yaml=crm_yaml)
    minted = await mint(gateway, "curator", "sales", "stranger")
    await assert_refused(gateway, {"authorization": f"Bearer {minted['stranger']}"})
    await assert_acked_as(gateway, {"authorization": f"Bearer {minted['sales']}"}, "sales")
    without_sales = crm_yaml.replace("  sales: { read: [crm], write: [crm] }\n", "")
    await gateway.data(APPLY, {"yaml": without_sales}, minted["curator"])
    await assert_refused(gateway, {"authorization": f"Bearer {minted['sales']}"})


async def test_the_dev_gateway_needs_no_token_on_loopback(gateway: Gateway) -> None:
    await assert_acked_as(gateway, None, "dev")


async def run(ws: ClientConnection, op: str, query: str) -> dict[str, Any]:
    """One operation on an acknowledged socket; returns its single result payload."""
    await ws.send(json.dumps({"id": op, "type": "subscribe", "payload": {"query": query}}))
    result = await receive(ws)
    assert (result["id"], result["type"]) == (op, "next"), result
    assert (await receive(ws)) == {"id": op, "type": "complete"}
    payload: dict[str, Any] = result["payload"]
    return payload


async def test_an_open_socket_follows_policy_changes(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    """Each operation on a socket is decided under the policy in force when it runs."""
    gateway = await start_gateway(policy_yaml=crm_yaml)
    minted = await mint(gateway, "curator", "planner")
    async with await init(gateway, {"authorization": f"Bearer {minted['planner']}"}) as ws:
        assert (await receive(ws))["type"] == "connection_ack"
        before = await run(ws, "1", "{ profile { readLanes } }")
        assert before == {"data": {"profile": {"readLanes": ["crm", "notes"]}}}
        narrowed = crm_yaml.replace(
            "read: [crm, notes], write: [notes]", "read: [notes], write: [notes]"
        )
        assert narrowed != crm_yaml
        await gateway.data(APPLY, {"yaml": narrowed}, minted["curator"])
        after = await run(ws, "2", "{ profile { readLanes } }")
        assert after == {"data": {"profile": {"readLanes": ["notes"]}}}
        removed = crm_yaml.replace("  planner: { read: [crm, notes], write: [notes] }\n", "")
        await gateway.data(APPLY, {"yaml": removed}, minted["curator"])
        refused = await run(ws, "3", "{ profile { readLanes } }")
        [error] = refused["errors"]
        # refusals over a socket carry the same message and code as over HTTP
        assert error["message"] == (
            "agent 'planner' is not declared by the policy in force; "
            "an operator must add it to the policy's agents before its token works again"
        )
        assert no_request_id(error)["extensions"] == {"code": "UNAUTHENTICATED", "agent": "planner"}


async def test_an_open_socket_reads_what_is_current(gateway: Gateway) -> None:
    """Nothing one operation loaded is served to a later one on the same socket."""
    written = await gateway.data('mutation { ingest(input: {content: "v1"}) { id } }')
    query = f'{{ record(id: "{written["ingest"]["id"]}") {{ content version }} }}'
    async with await init(gateway) as ws:
        assert (await receive(ws))["type"] == "connection_ack"
        first = await run(ws, "1", query)
        assert first == {"data": {"record": {"content": "v1", "version": 1}}}
        await gateway.data(
            'mutation($id: ID!) { update(id: $id, content: "v2") { id } }',
            {"id": written["ingest"]["id"]},
        )
        second = await run(ws, "2", query)
        assert second == {"data": {"record": {"content": "v2", "version": 2}}}


async def test_an_open_socket_stops_working_when_its_token_is_revoked(crm: Gateway) -> None:
    engine = create_engine(crm.database_url, pool_size=1)
    try:
        info, secret = await tokens.create(engine, "sales")
        async with await init(crm, {"authorization": f"Bearer {secret}"}) as ws:
            assert (await receive(ws))["type"] == "connection_ack"
            before = await run(ws, "1", "{ profile { agent } }")
            assert before == {"data": {"profile": {"agent": "sales"}}}
            await tokens.revoke(engine, info.id)
            after = await run(ws, "2", "{ profile { agent } }")
    finally:
        await engine.dispose()
    [error] = after["errors"]
    assert error["message"] == (
        "the bearer token is unknown or has been revoked; "
        "an operator mints a new one with 'edgeloom token create --agent NAME'"
    )
    assert no_request_id(error)["extensions"] == {"code": "UNAUTHENTICATED"}
