"""Connections that never finish a request: a header timeout, a header size limit, and,
under a small open-file limit, room left for every other client (gql.server.waiting)."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from gql.server.waiting import BODIES, MAX_HEADER_BYTES
from store.database import create_engine
from store.operations import tokens
from tests.conftest import DEV, GatewayFactory
from tests.gql.test_serve import serving
from tests.support import Databases, Gateway

PROFILE = {"query": "{ profile { agent } }"}


@contextlib.asynccontextmanager
async def opened(
    port: int, sent: bytes = b"", address: str = "127.0.0.1"
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A connection that sends `sent` and nothing more."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
    try:
        if sent:
            writer.write(sent)
            await writer.drain()
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def port_of(gateway: Gateway) -> int:
    return int(gateway.url.rsplit(":", 1)[1])


async def test_a_request_whose_headers_never_end_is_closed_after_the_header_timeout(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(anonymous_agent=DEV, header_timeout=0.5)
    port = port_of(gateway)
    async with (
        opened(port) as (silent, _),
        opened(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ") as (partial, _),
        # A connection kept alive after its answer waits for its next headers the same way.
        opened(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /hea") as (kept, _),
    ):
        # Closed without an answer, long before a client would give up (here 10 s).
        for reader in (silent, partial):
            assert await asyncio.wait_for(reader.read(), 10) == b""
        answered = await asyncio.wait_for(kept.read(), 10)
        assert answered.startswith(b"HTTP/1.1 200 ") and answered.count(b"HTTP/1.1") == 1
    # An ordinary request is answered as before.
    assert (await gateway.client.post(gateway.graphql_url, json=PROFILE)).status_code == 200


async def test_headers_over_the_limit_are_refused_with_431(gateway: Gateway) -> None:
    filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
    async with opened(port_of(gateway), b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n") as (
        reader,
        writer,
    ):
        with contextlib.suppress(ConnectionError):
            for _ in range(MAX_HEADER_BYTES // len(filler) + 2):
                writer.write(filler)
                await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert f"over {MAX_HEADER_BYTES} bytes".encode() in answer


async def test_headers_over_the_limit_in_one_read_are_refused_with_431(gateway: Gateway) -> None:
    # Sent at once, the whole request (a few KiB over the limit) reaches the gateway in
    # one read that also completes the headers: their bytes count all the same.
    filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
    request = (
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + filler * (MAX_HEADER_BYTES // len(filler) + 4)
        + b"\r\n"
    )
    async with opened(port_of(gateway), request) as (reader, _):
        answer = await asyncio.wait_for(reader.read(), 10)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert f"over {MAX_HEADER_BYTES} bytes".encode() in answer
    # Under the limit, the same request is answered.
    request = (
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        + filler * (MAX_HEADER_BYTES // len(filler) - 2)
        + b"\r\n"
    )
    async with opened(port_of(gateway), request) as (reader, _):
        answer = await asyncio.wait_for(reader.read(), 10)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def stalled_body(port: int, path: str = "/graphql") -> bytes:
    """A request that announces 100,000 bytes of body and sends 10."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        '{"query":"'
    ).encode()


async def test_a_body_that_never_arrives_is_answered_408_after_the_body_timeout(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(anonymous_agent=DEV, body_timeout=0.5)
    port = port_of(gateway)
    async with opened(port, stalled_body(port)) as (reader, _):
        answer = await asyncio.wait_for(reader.read(), 10)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:300]
    assert b"0.5 seconds" in answer
    # An ordinary request, body and all, is answered as before.
    assert (await gateway.client.post(gateway.graphql_url, json=PROFILE)).status_code == 200


async def test_connections_waiting_for_a_body_are_capped(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(anonymous_agent=DEV, body_timeout=60)
    assert gateway.state is not None
    gateway.state[BODIES].cap = 2
    port = port_of(gateway)
    async with opened(port, stalled_body(port)) as (oldest, _):
        # Within the timeout the first one waits...
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(oldest.read(1), 0.5)
        async with opened(port, stalled_body(port)), opened(port, stalled_body(port)):
            # ...until a third would pass the cap: the oldest is answered and closed.
            answer = await asyncio.wait_for(oldest.read(), 10)
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:300]
            assert (await gateway.client.post(gateway.graphql_url, json=PROFILE)).status_code == 200


# Small enough that the connections below would take every descriptor: 400 leaves a
# gateway 50 waiting connections (gql.server.waiting.waiting_cap) beside its database pools.
OPEN_FILES = 400
HALF_OPEN, STREAMS = 500, 200


def small_open_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


@contextlib.asynccontextmanager
async def crowd(port: int, count: int, sent: bytes, address: str) -> AsyncIterator[None]:
    """`count` connections from `address`, each sending `sent` and then nothing, kept
    open (or left closed by the gateway) until the block ends."""
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(count):
            with contextlib.suppress(ConnectionError):
                await stack.enter_async_context(opened(port, sent, address))
        yield


async def test_stalled_requests_and_mcp_streams_leave_other_clients_answered(
    databases: Databases, tmp_path: Path
) -> None:
    url = await databases.create()
    async with serving(
        url,
        tmp_path,
        "--policy",
        "policies/examples/crm.yaml",
        "--allowed-host",
        "memory.test",
        env={"EDGELOOM_ALLOWED_HOSTS": "other.test, third.test"},
        preexec_fn=small_open_file_limit,
    ) as served:
        engine = create_engine(url, pool_size=1)
        try:
            _, secret = await tokens.create(engine, "sales")
        finally:
            await engine.dispose()
        bearer = {"authorization": f"Bearer {secret}"}
        port = int(served.url.split(":")[2].split("/")[0])
        stream = (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {secret}\r\n"
            "Accept: application/json, text/event-stream\r\n\r\n"
        ).encode()
        async with (
            crowd(port, HALF_OPEN, b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\n", "127.0.0.2"),
            crowd(port, STREAMS, stream, "127.0.0.3"),
            httpx.AsyncClient(timeout=10) as fresh,
        ):
            for _ in range(3):
                response = await fresh.post(served.url, json=PROFILE, headers=bearer)
                assert response.json() == {"data": {"profile": {"agent": "sales"}}}
                assert (
                    await fresh.get(served.url.replace("/graphql", "/healthz"))
                ).status_code == 200
            # The MCP endpoint offers no stream to hold open: a GET is refused at once.
            refused = await fresh.get(
                served.url.replace("/graphql", "/mcp"),
                headers=bearer | {"accept": "application/json, text/event-stream"},
            )
            assert refused.status_code == 405 and refused.headers["allow"] == "POST"
            # The names the operator gave, on the command line and in the environment.
            for host, status in (("memory.test", 200), ("third.test", 200), ("evil.test", 403)):
                response = await fresh.post(
                    served.url, json=PROFILE, headers=bearer | {"host": host}
                )
                assert response.status_code == status, (host, response.text)
        served.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(served.process.wait(), 15)
    log = served.log.read_text()
    assert "Traceback" not in log, log
    assert "the oldest are closed" in log, log
