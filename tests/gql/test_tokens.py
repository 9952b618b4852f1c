"""Bearer tokens over HTTP: who may call, and the operator's token commands."""

from __future__ import annotations

import asyncio
import os

import pytest

from store.database import create_engine
from store.operations import tokens
from tests.conftest import GatewayFactory
from tests.gql._policy_support import APPLY, INGEST, mint
from tests.support import EDGELOOM, Databases, Gateway, without_request_ids

PROFILE = "{ profile { agent } }"
NO_TOKEN = (
    "this gateway needs a bearer token: send the header 'Authorization: Bearer <token>' "
    '(over WebSocket, connection_init payload {"authorization": "Bearer <token>"}); '
    "an operator mints one with 'edgeloom token create --agent NAME'"
)
BAD_TOKEN = (
    "the bearer token is unknown or has been revoked; "
    "an operator mints a new one with 'edgeloom token create --agent NAME'"
)


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml)


async def raw_error(gateway: Gateway, query: str, headers: dict[str, str]) -> dict[str, object]:
    response = await gateway.client.post(
        gateway.graphql_url, json={"query": query}, headers=headers
    )
    errors = without_request_ids(response.json())["errors"]
    assert len(errors) == 1, errors
    error: dict[str, object] = errors[0]
    return error


def unauthenticated(error: dict[str, object], message: str) -> None:
    assert error["message"] == message, error
    assert error["extensions"] == {"code": "UNAUTHENTICATED"}, error


async def test_a_bearer_token_names_the_agent(crm: Gateway) -> None:
    minted = await mint(crm, "sales", "planner")
    for agent, token in minted.items():
        assert (await crm.data(PROFILE, token=token))["profile"]["agent"] == agent
    response = await crm.client.post(
        crm.graphql_url,
        json={"query": PROFILE},
        headers={"Authorization": f"bearer   {minted['sales']}"},
    )
    assert response.json() == {"data": {"profile": {"agent": "sales"}}}


async def test_without_a_token_the_call_is_refused_saying_how_to_get_one(crm: Gateway) -> None:
    for query in (PROFILE, "{ policy { version } }", "{ records { totalCount } }"):
        unauthenticated(await crm.error(query), NO_TOKEN)
    unauthenticated(await crm.error(INGEST, {"input": {"content": "x", "lane": "notes"}}), NO_TOKEN)
    unauthenticated(await raw_error(crm, PROFILE, {"authorization": ""}), NO_TOKEN)


async def test_unknown_and_malformed_tokens_are_refused(crm: Gateway) -> None:
    unauthenticated(await crm.error(PROFILE, token="elt_not-a-real-token"), BAD_TOKEN)
    for value in ("Basic dXNlcjpwYXNz", "Bearer", "Token abc"):
        unauthenticated(
            await raw_error(crm, PROFILE, {"authorization": value}),
            "the Authorization value must be 'Bearer <token>'",
        )


async def test_a_revoked_token_is_refused(crm: Gateway) -> None:
    engine = create_engine(crm.database_url, pool_size=1)
    try:
        info, secret = await tokens.create(engine, "sales")
        assert (await crm.data(PROFILE, token=secret))["profile"]["agent"] == "sales"
        await tokens.revoke(engine, info.id)
    finally:
        await engine.dispose()
    unauthenticated(await crm.error(PROFILE, token=secret), BAD_TOKEN)
    unauthenticated(
        await crm.error(INGEST, {"input": {"content": "x", "lane": "crm"}}, secret), BAD_TOKEN
    )


async def test_a_token_for_an_agent_not_in_the_policy_is_refused(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(policy_yaml=crm_yaml)
    minted = await mint(gateway, "curator", "sales", "stranger")
    refusal = (
        "agent {!r} is not declared by the policy in force; "
        "an operator must add it to the policy's agents before its token works again"
    )
    error = await gateway.error(PROFILE, token=minted["stranger"])
    assert error["message"] == refusal.format("stranger")
    assert error["extensions"]["code"] == "UNAUTHENTICATED"

    record = await gateway.data(
        INGEST,
        {"input": {"content": "call", "lane": "crm", "sourceType": "meeting"}},
        minted["sales"],
    )
    record_id = record["ingest"]["id"]
    without_sales = crm_yaml.replace("  sales: { read: [crm], write: [crm] }\n", "")
    assert without_sales != crm_yaml
    await gateway.data(APPLY, {"yaml": without_sales}, minted["curator"])
    token = minted["sales"]
    for query, variables in [
        (PROFILE, {}),
        ("{ policy { version } }", {}),
        ("query($id: ID!) { record(id: $id) { id } }", {"id": record_id}),
        ("{ records { totalCount } }", {}),
        ('{ gather(match: ["org:Acme"]) { totalCount } }', {}),
        ("{ labels { label } }", {}),
        ("{ audit { totalCount } }", {}),
        (INGEST, {"input": {"content": "x", "lane": "crm", "sourceType": "meeting"}}),
        ('mutation($id: ID!) { update(id: $id, content: "y") { id } }', {"id": record_id}),
    ]:
        error = await gateway.error(query, variables, token)
        assert error["message"] == refusal.format("sales"), query
        assert error["extensions"]["code"] == "UNAUTHENTICATED", query


async def run_cli(database_url: str, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(EDGELOOM),
        *args,
        env={**os.environ, "DATABASE_URL": database_url},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def token_rows(listing: str) -> dict[str, list[str]]:
    """`token list` output by token id: agent, created, expires, last used, state."""
    rows = [line.split("\t") for line in listing.strip().splitlines()]
    return {row[0]: row[1:] for row in rows}


async def test_token_commands_create_list_and_revoke(crm: Gateway) -> None:
    code, out, err = await run_cli(crm.database_url, "token", "list")
    assert code == 0, err
    before = token_rows(out)
    code, out, err = await run_cli(crm.database_url, "token", "create", "--agent", "planner")
    assert code == 0, err
    secret = out.strip().splitlines()[-1]
    assert secret.startswith("elt_") and " " not in secret
    assert (await crm.data(PROFILE, token=secret))["profile"]["agent"] == "planner"

    code, out, err = await run_cli(crm.database_url, "token", "list")
    assert code == 0, err
    assert secret not in out
    after = token_rows(out)
    [token_id] = after.keys() - before.keys()
    assert token_id.startswith("tok_")
    assert (after[token_id][0], after[token_id][4]) == ("planner", "active")

    code, out, err = await run_cli(crm.database_url, "token", "revoke", token_id)
    assert code == 0, err
    assert out.strip() == f"token {token_id} for agent planner revoked"
    unauthenticated(await crm.error(PROFILE, token=secret), BAD_TOKEN)

    code, out, err = await run_cli(crm.database_url, "token", "list")
    assert code == 0, err
    assert token_rows(out)[token_id][4].startswith("revoked ")


async def test_token_create_refuses_an_agent_the_policy_does_not_declare(crm: Gateway) -> None:
    code, out, err = await run_cli(crm.database_url, "token", "create", "--agent", "stranger")
    assert code == 2, (out, err)
    assert "elt_" not in out
    [line] = err.strip().splitlines()
    assert line.startswith("edgeloom: agent 'stranger' is not declared by policy version "), line
    assert line.endswith(
        ", so its token would be refused; declared agents: ['curator', 'planner', 'sales']. "
        "Add it to the policy first (applyPolicy, or serve --policy FILE)"
    ), line


async def test_token_create_before_any_policy_is_allowed(databases: Databases) -> None:
    """Tokens may be minted first, for the policy the gateway will be started with."""
    code, out, err = await run_cli(await databases.create(), "token", "create", "--agent", "sales")
    assert code == 0, err
    assert out.strip().splitlines()[-1].startswith("elt_")
