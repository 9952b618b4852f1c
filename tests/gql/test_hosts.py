"""Every gateway answers only the host names it serves (DNS rebinding); the tokenless
development gateway, loopback names only."""

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


FOREIGN = ({"host": "attacker.example:{port}", "origin": "http://attacker.example"},
           {"host": "127.0.0.1:{port}", "origin": "http://attacker.example"},
           {"host": "memory.example:{port}"})  # fmt: skip


async def refused_everywhere(gateway: Gateway, headers: dict[str, str], token: str) -> None:
    """/metrics (from loopback, which needs no token), /graphql, /mcp, the dashboard and
    a WebSocket all refuse a request for a name the gateway does not serve."""
    port = port_of(gateway)
    headers = {k: v.format(port=port) for k, v in headers.items()}
    bearer = {"authorization": f"Bearer {token}"}
    client = gateway.client
    answers = [
        await client.get(gateway.url + "/metrics", headers=headers),
        await client.post(gateway.graphql_url, json={"query": PROFILE}, headers=headers | bearer),
        await client.post(
            gateway.url + "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers=headers | bearer | {"accept": "application/json, text/event-stream"},
        ),
        await client.get(gateway.url + "/dashboard", headers=headers),
    ]
    for response in answers:
        assert response.status_code == 403, (response.url, headers, response.text)
        [error] = response.json()["errors"]
        assert no_request_id(error)["extensions"] == {"code": "FORBIDDEN"}
        assert "--allowed-host NAME or EDGELOOM_ALLOWED_HOSTS" in error["message"], error
    async with connect(
        f"ws://{headers['host']}/graphql",
        host="127.0.0.1",
        port=port,
        subprotocols=[PROTOCOL],
        origin=headers.get("origin"),  # type: ignore[arg-type]
        open_timeout=TIMEOUT,
    ) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await ws.send('{"type": "connection_init"}')
            await receive(ws)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403


@pytest.mark.parametrize("headers", FOREIGN)
async def test_a_gateway_with_a_policy_refuses_names_it_does_not_serve(
    start_gateway: GatewayFactory, crm_yaml: str, headers: dict[str, str]
) -> None:
    crm = await start_gateway(policy_yaml=crm_yaml)
    token = (await mint(crm, "sales"))["sales"]
    await refused_everywhere(crm, headers, token)


async def test_a_gateway_with_a_policy_serves_loopback_addresses_and_the_names_it_is_given(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    crm = await start_gateway(policy_yaml=crm_yaml, allowed_hosts=("Memory.Example",))
    token = (await mint(crm, "sales"))["sales"]
    port = port_of(crm)
    for host, origin in (
        ("memory.example", "https://memory.example"),
        (f"memory.example:{port}", None),
        (f"localhost:{port}", f"http://localhost:{port}"),
        ("10.1.2.3:4000", "http://10.1.2.3:4000"),
        ("[fd00::1]", None),
    ):
        headers = {"host": host, "authorization": f"Bearer {token}"}
        if origin:
            headers["origin"] = origin
        status, body = await post(crm, headers)
        assert (status, body) == (200, {"data": {"profile": {"agent": "sales"}}}), headers
        metrics = await crm.client.get(crm.url + "/metrics", headers={"host": host})
        assert metrics.status_code == 200
    # A name given is not a suffix: another under it is refused.
    await refused_everywhere(crm, {"host": "evil.memory.example"}, token)
