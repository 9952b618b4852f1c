"""The MCP tools over streamable HTTP at /mcp on a live gateway, driven by the SDK's client."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import httpx
import pytest
from graphql import GraphQLObjectType
from mcp import MCPError

from gql.api.auth import BAD_TOKEN, NO_TOKEN
from gql.api.schema import schema
from gql.server.hosts import Hosts
from store.database import create_engine
from store.operations import tokens
from tests.conftest import GatewayFactory
from tests.gql._api import unique
from tests.gql._mcp import Connect, call, over_each, over_http, refused
from tests.gql._policy_support import mint
from tests.support import Gateway, no_request_id

TOOLS = {
    *("e_ingest", "e_gather", "e_read", "e_update", "e_property", "e_audit", "e_system"),
    "e_search",
    *("edge_upsert", "edge_list", "related", "conflict_resolve", "conflicts", "ego", "retire"),
}
BUDGET = (
    "label(s) ['budget'] not allowed for source_type 'meeting' in lane 'crm'; "
    "allowed: ['org', 'person', 'topic']"
)


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml)


@pytest.fixture(scope="module")
async def minted(crm: Gateway) -> dict[str, str]:
    return await mint(crm, "sales", "planner", "curator")


def _mutation_arg(field: str, arg: str) -> str:
    mutation = schema._schema.mutation_type
    assert isinstance(mutation, GraphQLObjectType)
    text = mutation.fields[field].args[arg].description
    assert text
    return text


async def test_the_tools_are_listed_with_every_argument_described_in_the_schemas_words(
    crm: Gateway, minted: dict[str, str]
) -> None:
    async with over_http(crm, minted["sales"]) as session:
        listed = (await session.list_tools()).tools
    assert {t.name for t in listed} == TOOLS
    for tool in listed:
        assert tool.description, tool.name
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), (tool.name, name)
    update = next(t for t in listed if t.name == "e_update")
    # The same text as GraphiQL's docs pane shows, not a copy of it.
    said = update.input_schema["properties"]["expected_version"]["description"]
    assert said == _mutation_arg("update", "expectedVersion")
    ingest = next(t for t in listed if t.name == "e_ingest")
    assert (
        "reserved for the engine" in ingest.input_schema["properties"]["properties"]["description"]
    )
    assert ingest.input_schema["properties"]["records"]["items"]["required"] == ["content"]


async def test_a_refusal_is_a_tool_error_with_the_graphql_message_and_code(
    crm: Gateway, minted: dict[str, str]
) -> None:
    arguments: dict[str, Any] = {
        "content": "Renewal call with Acme.",
        "source_type": "meeting",
        "assign_lane": "crm",
        "properties": ["org:Acme", "budget:120k"],
    }
    async with over_http(crm, minted["sales"]) as session:
        error = await refused(session, "e_ingest", **arguments)
    assert error["error"] == BUDGET
    assert error["code"] == "BAD_USER_INPUT"
    on_graphql = await crm.error(
        "mutation($i: IngestInput!) { ingest(input: $i) { id } }",
        {
            "i": {
                "content": arguments["content"],
                "sourceType": "meeting",
                "lane": "crm",
                "properties": arguments["properties"],
            }
        },
        token=minted["sales"],
    )
    assert on_graphql["message"] == error["error"]
    assert on_graphql["extensions"]["code"] == error["code"]
    assert isinstance(error.get("requestId"), str)  # the id of this call's log line
    assert {k: v for k, v in error.items() if k not in ("error", "code", "requestId")} == {
        k: v for k, v in on_graphql["extensions"].items() if k != "code"
    }


async def test_a_record_in_a_lane_the_caller_cannot_read_is_nonexistent(
    crm: Gateway, minted: dict[str, str]
) -> None:
    async with over_http(crm, minted["curator"]) as session:
        hidden = await call(session, "e_ingest", content="private note", assign_lane="notes")
    nowhere = "sr_" + "0" * 32
    async with over_http(crm, minted["sales"]) as session:
        for tool, extra in (("e_read", {}), ("e_update", {"content": "mine now"})):
            unreadable = await refused(session, tool, id=hidden["id"], **extra)
            missing = await refused(session, tool, id=nowhere, **extra)
            assert unreadable["code"] == missing["code"] == "NOT_FOUND"
            assert unreadable["error"].replace(hidden["id"], "<id>") == missing["error"].replace(
                nowhere, "<id>"
            )
        gathered = await call(session, "e_gather", action="union", match=["general:private note"])
        assert gathered["total_count"] == 0
        feed = await call(session, "e_audit", action="feed", after="0", first=500)
        assert hidden["id"] not in str(feed)


@over_each
async def test_pages_of_twenty_reach_the_end_of_a_list(
    connect: Connect, crm: Gateway, minted: dict[str, str]
) -> None:
    tag = unique("topic:")
    async with connect(crm, minted["curator"]) as session:
        await call(
            session,
            "e_ingest",
            records=[
                {"content": f"n{i}", "properties": [tag], "assign_lane": "notes"} for i in range(45)
            ],
        )
        seen: list[str] = []
        sizes = []
        after = None
        while True:
            page = await call(session, "e_gather", action="timeline", match=[tag], after=after)
            assert page["total_count"] == 45
            sizes.append(len(page["items"]))
            seen += [item["id"] for item in page["items"]]
            if not page["page_info"]["has_next_page"]:
                break
            after = page["page_info"]["end_cursor"]
    assert sizes == [20, 20, 5]
    assert len(set(seen)) == 45


async def test_without_a_valid_token_mcp_is_refused_as_graphql_is(
    crm: Gateway, minted: dict[str, str]
) -> None:
    for headers, message in (({}, NO_TOKEN), ({"Authorization": "Bearer elt_nope"}, BAD_TOKEN)):
        response = await crm.client.post(
            crm.url + "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**headers, "accept": "application/json, text/event-stream"},
        )
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert no_request_id(response.json()["errors"][0]) == {
            "message": message,
            "extensions": {"code": "UNAUTHENTICATED"},
        }
    # The SDK's client meets the 401 at initialize and fails the connection.
    with pytest.RaisesGroup(pytest.RaisesGroup(MCPError)):
        async with over_http(crm):
            pass


async def test_a_token_revoked_during_a_session_is_refused_at_the_next_call(
    crm: Gateway,
) -> None:
    token = (await mint(crm, "planner"))["planner"]
    engine = create_engine(crm.database_url, pool_size=1)
    try:
        async with over_http(crm, token) as session:
            assert (await call(session, "e_system"))["agent"] == "planner"
            held = [t for t in await tokens.list_all(engine) if t.agent == "planner"]
            await tokens.revoke(engine, held[-1].id)
            with pytest.raises(MCPError):
                await session.call_tool("e_system", {})
    finally:
        await engine.dispose()
    response = await crm.client.post(
        crm.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {token}", "accept": "application/json"},
    )
    assert response.status_code == 401
    assert response.json()["errors"][0]["message"] == BAD_TOKEN


async def test_development_mode_answers_loopback_only(start_gateway: GatewayFactory) -> None:
    dev = await start_gateway(anonymous_agent="dev")
    async with over_http(dev) as session:
        assert (await call(session, "e_system"))["agent"] == "dev"
    async with httpx.AsyncClient() as client:
        response = await client.post(
            dev.url + "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"host": "evil.example", "accept": "application/json"},
        )
    assert response.status_code == 403
    assert response.json()["errors"][0]["message"] == Hosts((), development=True).problem(
        "evil.example", None
    )


async def test_an_unknown_argument_is_refused_naming_the_tools_arguments(
    crm: Gateway, minted: dict[str, str]
) -> None:
    async with over_http(crm, minted["curator"]) as session:
        error = await refused(session, "e_ingest", content="a note", lane="notes")
        before = await call(session, "e_audit", action="list", kinds=["sr_ingested"], first=500)
    arguments = [
        *("adjusts", "assign_lane", "content", "embedding", "expire_now", "expires_at"),
        *("idempotency_key", "properties", "records", "source_type"),
    ]
    assert error == {
        "error": "e_ingest takes no argument 'lane' (did you mean 'assign_lane'?); its "
        f"arguments are {arguments}",
        "code": "BAD_USER_INPUT",
        "allowed": arguments,
    }
    # Nothing was written to the default lane in its stead.
    assert "a note" not in str(before)


async def test_the_server_reports_edgeloom_s_version(crm: Gateway, minted: dict[str, str]) -> None:
    async with over_http(crm, minted["curator"]) as session:
        initialized = await session.initialize()
    assert initialized.server_info.version == metadata.version("edgeloom")
    assert initialized.server_info.name == "edgeloom"
