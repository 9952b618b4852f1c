"""Driving the MCP tools with the SDK's own client: over streamable HTTP to a live
gateway, and over stdio to a real `edgeloom mcp` process."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support import EDGELOOM, Gateway


@asynccontextmanager
async def over_http(gateway: Gateway, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(gateway.url + "/mcp", http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def over_stdio(database_url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    env = {k: v for k, v in os.environ.items() if k != "EDGELOOM_TOKEN"}
    env["DATABASE_URL"] = database_url
    args = ["mcp"] + (["--token", token] if token else [])
    params = StdioServerParameters(command=str(EDGELOOM), args=args, env=env)
    async with (
        stdio_client(params) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


def stdio_of(
    gateway: Gateway, token: str | None = None
) -> AbstractAsyncContextManager[ClientSession]:
    """A real `edgeloom mcp` process on the gateway's database."""
    return over_stdio(gateway.database_url, token)


Connect = Callable[[Gateway, str | None], AbstractAsyncContextManager[ClientSession]]
TRANSPORTS: dict[str, Connect] = {"http": over_http, "stdio": stdio_of}
"""Both ways an agent connects, for tests that run the same calls over each."""
over_each = pytest.mark.parametrize("connect", TRANSPORTS.values(), ids=TRANSPORTS.keys())


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """The structured result of a call that must succeed."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    body: dict[str, Any] = result.structured_content or {}
    return body


async def refused(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """The error of a call that must be refused: {error, code, ...details}."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    body: dict[str, Any] = result.structured_content or {}
    assert set(body) >= {"error", "code"}, body
    return body
