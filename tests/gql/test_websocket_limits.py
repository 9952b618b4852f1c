"""WebSocket connections are capped per process and, before their connection_init is
acknowledged, per client address; an idle socket is closed after the init timeout."""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import subprocess
import sys
import time
from contextlib import AsyncExitStack

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from gql.server.descriptors import HTTP_HEADROOM
from gql.server.settings import Settings
from gql.server.sockets import SocketCaps, fitted
from tests.conftest import GatewayFactory
from tests.gql._policy_support import mint
from tests.support import Gateway, without_request_ids

PROTOCOL = "graphql-transport-ws"
TIMEOUT = 10
PER_ADDRESS, UNAUTHENTICATED, TOTAL = 3, 5, 8


@pytest.fixture(scope="module")
async def capped(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(
        policy_yaml=crm_yaml,
        max_ws_unauthenticated_per_address=PER_ADDRESS,
        max_ws_unauthenticated=UNAUTHENTICATED,
        max_ws_connections=TOTAL,
        ws_init_timeout=30.0,
    )


async def idle(stack: AsyncExitStack, gateway: Gateway, address: str) -> ClientConnection:
    """A socket opened from `address` (any of 127/8) that never sends connection_init."""
    return await stack.enter_async_context(
        connect(
            gateway.ws_url,
            subprotocols=[PROTOCOL],
            open_timeout=TIMEOUT,
            local_addr=(address, 0),
        )
    )


async def subscriber(stack: AsyncExitStack, gateway: Gateway, token: str) -> ClientConnection:
    """A socket whose connection_init is acknowledged."""
    ws = await idle(stack, gateway, "127.0.0.1")
    await ws.send(
        json.dumps({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
    )
    ack = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
    assert ack["type"] == "connection_ack", ack
    return ws


async def refusal(gateway: Gateway, address: str) -> dict[str, object]:
    """The upgrade from `address` is answered 503; the error it carries."""
    async with AsyncExitStack() as stack:
        with pytest.raises(InvalidStatus) as refused:
            await idle(stack, gateway, address)
    response = refused.value.response
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    [error] = without_request_ids(json.loads(response.body or b""))["errors"]
    assert isinstance(error, dict)
    return error


async def assert_http_answers(gateway: Gateway, token: str) -> None:
    assert (await gateway.client.get(gateway.url + "/healthz")).status_code == 200
    data = await gateway.data("{ profile { agent } }", token=token)
    assert data == {"profile": {"agent": "sales"}}


async def test_unauthenticated_sockets_over_the_cap_per_address_are_refused(
    capped: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    token = (await mint(capped, "sales"))["sales"]
    async with AsyncExitStack() as stack:
        for _ in range(PER_ADDRESS):
            await idle(stack, capped, "127.0.0.1")
        with caplog.at_level(logging.INFO):
            error = await refusal(capped, "127.0.0.1")
            await refusal(capped, "127.0.0.1")
        # One warning for both, and no error from the server for either.
        assert [r.levelname for r in caplog.records if r.levelno >= logging.WARNING] == [
            "WARNING"
        ], caplog.text
        assert error == {
            "message": f"{PER_ADDRESS} WebSocket connections from this address are waiting for "
            "their connection_init, the most one address may hold; send connection_init on "
            "those before opening more",
            "extensions": {
                "code": "SERVICE_UNAVAILABLE",
                "maxUnauthenticatedPerAddress": PER_ADDRESS,
            },
        }
        # Another address still connects, and HTTP is answered all along.
        await idle(stack, capped, "127.0.0.2")
        await assert_http_answers(capped, token)
    # Closed, they no longer count.
    async with AsyncExitStack() as stack:
        await subscriber(stack, capped, token)


async def test_unauthenticated_sockets_over_the_cap_per_process_are_refused(
    capped: Gateway,
) -> None:
    token = (await mint(capped, "sales"))["sales"]
    async with AsyncExitStack() as stack:
        for n in range(UNAUTHENTICATED):
            await idle(stack, capped, f"127.0.0.{2 + n % 2}")
        error = await refusal(capped, "127.0.0.4")
        assert error["extensions"] == {
            "code": "SERVICE_UNAVAILABLE",
            "maxUnauthenticated": UNAUTHENTICATED,
        }
        await assert_http_answers(capped, token)


async def test_authenticated_subscribers_beyond_the_unauthenticated_caps_connect(
    capped: Gateway,
) -> None:
    token = (await mint(capped, "sales"))["sales"]
    async with AsyncExitStack() as stack:
        # More than either unauthenticated cap, all from one address.
        sockets = [await subscriber(stack, capped, token) for _ in range(TOTAL)]
        error = await refusal(capped, "127.0.0.1")
        assert error["extensions"] == {
            "code": "SERVICE_UNAVAILABLE",
            "maxConnections": TOTAL,
        }
        await assert_http_answers(capped, token)
        last = sockets[-1]
        query = {"query": "{ profile { agent } }"}
        await last.send(json.dumps({"id": "1", "type": "subscribe", "payload": query}))
        result = json.loads(await asyncio.wait_for(last.recv(), TIMEOUT))
        assert result["payload"] == {"data": {"profile": {"agent": "sales"}}}


async def test_a_socket_without_connection_init_is_closed_after_the_timeout(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(
        policy_yaml=crm_yaml, ws_init_timeout=0.5, max_ws_unauthenticated_per_address=1
    )
    async with AsyncExitStack() as stack:
        ws = await idle(stack, gateway, "127.0.0.1")
        started = time.monotonic()
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), TIMEOUT)
        assert time.monotonic() - started < 3
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4408
    # Its place is free again.
    async with AsyncExitStack() as stack:
        await idle(stack, gateway, "127.0.0.1")


def test_the_caps_fit_the_open_file_limit() -> None:
    caps = SocketCaps(16_384, 1024, 256)
    assert fitted(caps, 1_048_576) == caps
    assert fitted(caps, 8192) == SocketCaps(8192 - HTTP_HEADROOM, 1024, 256)
    # A small limit keeps a quarter of it for HTTP.
    assert fitted(caps, 1024) == SocketCaps(768, 768, 256)


def test_the_default_caps_hold_ten_thousand_subscribers_from_one_address() -> None:
    """The feed's scale target: 10,000 authenticated subscribers on one process, all
    behind one proxy address (the per-address cap counts only sockets still waiting for
    their connection_init), with a full queue of waiting ones beside them, under an
    open-file limit as small as 20,000."""
    settings = Settings(database_url="postgresql://unused")
    caps = SocketCaps(
        settings.max_ws_connections,
        settings.max_ws_unauthenticated,
        settings.max_ws_unauthenticated_per_address,
    )
    assert caps.total >= 10_000 + caps.unauthenticated
    assert fitted(caps, 20_000).total >= 10_000 + caps.unauthenticated


def test_the_open_file_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip("no finite hard limit above 256 to raise to")
    script = (
        "import resource; from gql.server.sockets import open_files_limit; "
        "print(open_files_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)),
    )
    assert done.stdout.split() == [str(hard), str(hard)]
