"""The tokenless development gateway answers loopback names only (DNS rebinding)."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.conftest import GatewayFactory
from tests.gql._policy_support import mint
from tests.gql.test_websocket_auth import PROTOCOL, TIMEOUT, receive
from tests.support import Gateway, no_request_id

PROFILE = "{ profile { agent } }"


def port_of(gateway: Gateway) -> int:
    return int(gateway.url.rsplit(":", 1)[1])


async def post(gateway: Gateway, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    response = await gateway.client.post(
        gateway.graphql_url, json={"query": PROFILE}, headers=headers
    )
    return response.status_code, response.json()


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "attacker.example"},
        {"host": "attacker.example:{port}", "origin": "http://attacker.example:{port}"},
        {"host": "127.0.0.1:{port}", "origin": "http://attacker.example:{port}"},
        {"host": "localhost.attacker.example"},
        {"host": "127.0.0.1:{port}", "origin": "null"},
    ],
)
async def test_a_request_for_another_name_is_refused(
    gateway: Gateway, headers: dict[str, str]
) -> None:
    port = port_of(gateway)
    status, body = await post(gateway, {k: v.format(port=port) for k, v in headers.items()})
    assert status == 403, body
    [error] = body["errors"]  # type: ignore[misc]
    assert no_request_id(error)["extensions"] == {"code": "FORBIDDEN"}
    assert error["message"].startswith(
        "in development mode (no policy, no token) the gateway answers only requests "
        "addressed to 127.0.0.1, localhost or [::1] (any port), from pages on those hosts"
    )
    assert "data" not in body


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "127.0.0.1:{port}"},
        {"host": "localhost:{port}", "origin": "http://localhost:{port}"},
        {"host": "[::1]:{port}", "origin": "http://127.0.0.1:{port}"},
        {"host": "LOCALHOST"},
    ],
)
async def test_loopback_names_are_served(gateway: Gateway, headers: dict[str, str]) -> None:
    port = port_of(gateway)
    status, body = await post(gateway, {k: v.format(port=port) for k, v in headers.items()})
    assert (status, body) == (200, {"data": {"profile": {"agent": "dev"}}})


async def test_a_websocket_for_another_name_closes_with_4403(gateway: Gateway) -> None:
    port = port_of(gateway)
    async with connect(
        f"ws://attacker.example:{port}/graphql",
        host="127.0.0.1",
        port=port,
        subprotocols=[PROTOCOL],
        origin=f"http://attacker.example:{port}",
        open_timeout=TIMEOUT,
    ) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await ws.send('{"type": "connection_init"}')
            await receive(ws)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4403


async def test_with_a_policy_and_tokens_any_name_is_served(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    crm = await start_gateway(policy_yaml=crm_yaml)
    token = (await mint(crm, "sales"))["sales"]
    status, body = await post(crm, {"host": "memory.example", "authorization": f"Bearer {token}"})
    assert (status, body) == (200, {"data": {"profile": {"agent": "sales"}}})
