"""`edgeloom mcp`: the tools over stdio in a real subprocess, driven by the SDK's client,
and `--print-config`."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from gql.api.auth import BAD_TOKEN
from gql.cli.mcp_config import PLACEHOLDER
from gql.cli.mcp_stdio import NO_STDIO_TOKEN
from store.database import DEFAULT_DATA_DIR, create_engine
from store.operations import tokens
from tests.conftest import GatewayFactory
from tests.gql._mcp import call, over_http, over_stdio, refused
from tests.gql._policy_support import mint
from tests.support import EDGELOOM, Gateway

BUDGET = (
    "label(s) ['budget'] not allowed for source_type 'meeting' in lane 'crm'; "
    "allowed: ['org', 'person', 'topic']"
)


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml)


async def test_the_tools_over_stdio_as_the_tokens_agent(crm: Gateway) -> None:
    minted = await mint(crm, "sales", "curator")
    async with over_stdio(crm.database_url, minted["curator"]) as s:
        hidden = await call(s, "e_ingest", content="curator's note", assign_lane="notes")
    async with over_stdio(crm.database_url, minted["sales"]) as s:
        listed = (await s.list_tools()).tools
        assert len(listed) == 15
        assert (await call(s, "e_system"))["agent"] == "sales"
        made = await call(
            s,
            "e_ingest",
            content="Renewal call with Acme.",
            source_type="meeting",
            assign_lane="crm",
            properties=["org:Acme"],
        )
        assert (await call(s, "e_read", id=made["id"]))["content"] == "Renewal call with Acme."
        error = await refused(
            s,
            "e_ingest",
            content="Renewal call with Acme.",
            source_type="meeting",
            assign_lane="crm",
            properties=["org:Acme", "budget:120k"],
        )
        assert (error["error"], error["code"]) == (BUDGET, "BAD_USER_INPUT")
        unreadable = await refused(s, "e_read", id=hidden["id"])
        assert unreadable == {
            "error": f"no record with id '{hidden['id']}' exists or is readable by you",
            "code": "NOT_FOUND",
            "id": hidden["id"],
        }
        # Seen by GraphQL: the same record, written by the same agent.
        seen = await crm.data(
            "query($id: ID!) { record(id: $id) { createdBy lane } }",
            {"id": made["id"]},
            token=minted["sales"],
        )
        assert seen["record"] == {"createdBy": "sales", "lane": "crm"}


async def test_a_missing_or_revoked_token_is_refused_at_every_call(crm: Gateway) -> None:
    async with over_stdio(crm.database_url) as s:
        error = await refused(s, "e_system")
        assert error == {"error": NO_STDIO_TOKEN, "code": "UNAUTHENTICATED"}
    token = (await mint(crm, "planner"))["planner"]
    engine = create_engine(crm.database_url, pool_size=1)
    try:
        async with over_stdio(crm.database_url, token) as s:
            assert (await call(s, "e_system"))["agent"] == "planner"
            held = [t for t in await tokens.list_all(engine) if t.agent == "planner"]
            await tokens.revoke(engine, held[-1].id)
            error = await refused(s, "e_gather", action="union", match=["org:Acme"])
            assert error == {"error": BAD_TOKEN, "code": "UNAUTHENTICATED"}
    finally:
        await engine.dispose()


async def test_print_config_names_both_transports() -> None:
    env = {**os.environ, "EDGELOOM_TOKEN": "elt_example"}
    env.pop("DATABASE_URL", None)
    process = await asyncio.create_subprocess_exec(
        str(EDGELOOM),
        "mcp",
        "--print-config",
        "--url",
        "http://127.0.0.1:4555",
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    servers = json.loads(out)["mcpServers"]
    assert servers["edgeloom"]["command"] == str(EDGELOOM.resolve())
    assert servers["edgeloom"]["args"] == ["mcp", "--data-dir", str(DEFAULT_DATA_DIR.resolve())]
    assert servers["edgeloom"]["env"] == {"EDGELOOM_TOKEN": "elt_example"}
    assert servers["edgeloom-http"] == {
        "type": "http",
        "url": "http://127.0.0.1:4555/mcp",
        "headers": {"Authorization": "Bearer elt_example"},
    }


async def _printed(database_url: str, url: str) -> dict[str, Any]:
    """What `edgeloom mcp --print-config` prints for the memory at `database_url`."""
    env = {k: v for k, v in os.environ.items() if k != "EDGELOOM_TOKEN"}
    env["DATABASE_URL"] = database_url
    process = await asyncio.create_subprocess_exec(
        str(EDGELOOM),
        "mcp",
        "--print-config",
        "--url",
        url,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    servers: dict[str, Any] = json.loads(out)["mcpServers"]
    return servers


@pytest.mark.over10s("the printed MCP stdio command started as a process, for two gateways")
async def test_print_config_works_as_printed_in_development_mode(
    gateway: Gateway, crm: Gateway
) -> None:
    servers = await _printed(gateway.database_url, gateway.url)
    stdio, http = servers["edgeloom"], servers["edgeloom-http"]
    assert "EDGELOOM_TOKEN" not in stdio.get("env", {})
    assert http == {"type": "http", "url": gateway.url + "/mcp"}
    # Pasted as printed: the runtime starts the command with the env it names.
    env = {k: v for k, v in os.environ.items() if k != "EDGELOOM_TOKEN"} | stdio.get("env", {})
    params = StdioServerParameters(command=stdio["command"], args=stdio["args"], env=env)
    async with (
        stdio_client(params) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        assert (await call(session, "e_system"))["agent"] == "dev"
    async with over_http(gateway, None) as session:
        assert (await call(session, "e_system"))["agent"] == "dev"

    # A gateway that needs tokens gets the placeholder to replace.
    servers = await _printed(crm.database_url, crm.url)
    assert servers["edgeloom"]["env"]["EDGELOOM_TOKEN"] == PLACEHOLDER
    assert servers["edgeloom-http"]["headers"] == {"Authorization": f"Bearer {PLACEHOLDER}"}
