"""Who calls is decided from the headers before the body is read; big variables are refused
before they are coerced, and no request stalls the others."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from gql.api.auth import NO_TOKEN
from gql.api.limits import (
    DEFAULT_MAX_FIELDS,
    MAX_LIST_ITEMS,
    MAX_VARIABLE_VALUES,
    MAX_VECTOR_ITEMS,
)
from gql.api.schema import MAX_VALIDATION_WORK
from store.intake.sources import IN_PARTS
from tests.conftest import GatewayFactory
from tests.gql._api import INGEST_MANY
from tests.gql._policy_support import mint
from tests.support import Gateway, no_request_id, without_request_ids

# 100,000 inputs, about 4 MB: seconds of coercion on the event loop if it were ever coerced.
BIG_BODY = json.dumps(
    {"query": INGEST_MANY, "variables": {"inputs": [{"content": "x"}] * 100_000}}
).encode()


async def record_total(gateway: Gateway, token: str) -> int:
    total: int = (await gateway.data("{ records { totalCount } }", token=token))["records"][
        "totalCount"
    ]
    return total


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml)


async def test_a_call_without_a_token_is_answered_before_its_body_is_read(crm: Gateway) -> None:
    """Only the head and a first slice of a 4 MB body are sent; the answer comes anyway."""
    host, port = crm.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            (
                f"POST /graphql HTTP/1.1\r\nHost: {host}:{port}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {len(BIG_BODY)}\r\n\r\n"
            ).encode()
            + BIG_BODY[:1000]
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        status_line, *header_lines = head.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in header_lines if line)
        assert status_line == "HTTP/1.1 401 Unauthorized", head
        assert headers["www-authenticate"] == "Bearer"
        body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), 10)
    finally:
        writer.close()
    assert without_request_ids(json.loads(body)) == {
        "errors": [{"message": NO_TOKEN, "extensions": {"code": "UNAUTHENTICATED"}}]
    }


async def test_health_answers_while_big_calls_without_a_token_arrive(crm: Gateway) -> None:
    async def tokenless() -> None:
        response = await crm.client.post(
            crm.graphql_url, content=BIG_BODY, headers={"content-type": "application/json"}
        )
        assert response.status_code == 401
        assert response.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"

    async def health() -> float:
        slowest = 0.0
        for _ in range(20):
            started = time.monotonic()
            assert (await crm.client.get(crm.url + "/healthz")).status_code == 200
            slowest = max(slowest, time.monotonic() - started)
            await asyncio.sleep(0.02)
        return slowest

    results = await asyncio.gather(health(), *(tokenless() for _ in range(4)))
    # Coercing them (as before) held the event loop for seconds per request.
    assert results[0] < 1.0, results[0]


async def test_a_list_over_the_batch_size_is_refused_before_coercion(crm: Gateway) -> None:
    token = (await mint(crm, "curator"))["curator"]
    response = await crm.client.post(
        crm.graphql_url,
        content=BIG_BODY,
        headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
    )
    assert response.status_code == 413
    [error] = response.json()["errors"]
    assert error["message"] == (
        "a list in the variables has 100,000 items; lists may hold at most 1000 "
        "(ingestMany takes at most 1000 records per call), a vector at most 2000 numbers, so "
        f"split the work into smaller calls (for intakeFolder: {IN_PARTS})"
    )
    assert no_request_id(error)["extensions"] == {
        "code": "BAD_USER_INPUT",
        "maxListItems": MAX_LIST_ITEMS,
        "maxVectorItems": MAX_VECTOR_ITEMS,
    }
    assert await record_total(crm, token) == 0


async def test_too_many_values_in_all_are_refused_before_coercion(crm: Gateway) -> None:
    token = (await mint(crm, "curator"))["curator"]
    # 400 inputs of 255 properties: no list is too long, but 100k+ values in all
    inputs = [
        {"content": "x", "lane": "notes", "properties": [f"n{i}:v" for i in range(255)]}
    ] * 400
    error = await crm.error(INGEST_MANY, {"inputs": inputs}, token)
    assert error["message"].startswith(f"the variables hold over {MAX_VARIABLE_VALUES:,} values")
    assert error["extensions"] == {
        "code": "BAD_USER_INPUT",
        "maxValues": MAX_VARIABLE_VALUES,
    }
    assert await record_total(crm, token) == 0


def repeated(times: int, selection: str, variant: int = 0) -> str:
    """`{ profile { <selection> x times } }`, made distinct by `variant` so no cache holds it."""
    return "{ profile { " + f"v{variant}: agent " + f"{selection} " * times + "} }"


async def test_a_document_over_the_field_limit_is_refused_by_name(crm: Gateway) -> None:
    token = (await mint(crm, "sales"))["sales"]
    # 5,000 repetitions, about 75 KB and just under the token limit.
    started = time.monotonic()
    error = await crm.error(repeated(4_995, "lanes { lane }"), token=token)
    assert time.monotonic() - started < 2.0
    assert error["message"] == (
        f"this document selects more than {DEFAULT_MAX_FIELDS:,} fields, the most one document "
        "may select (its fragments included); select each field once (repeated selections of "
        "a field return it once anyway) and split the rest into several requests"
    )
    assert error["extensions"] == {
        "code": "BAD_USER_INPUT",
        "maxFields": DEFAULT_MAX_FIELDS,
    }
    # Just under it, the same selection is answered.
    within = await crm.data(repeated(20, "lanes { lane }"), token=token)
    assert within["profile"]["v0"] == "sales"


async def test_a_document_too_costly_to_validate_is_refused_by_name(crm: Gateway) -> None:
    """A field repeated hundreds of times within the field limit: graphql-core's budget for
    comparing them runs out, and the refusal says which limit that is."""
    token = (await mint(crm, "sales"))["sales"]
    for query in ("{ " + "profile { agent } " * 400 + "}", "{ " + "__typename " * 800 + "}"):
        error = await crm.error(query, token=token)
        assert error["message"] == (
            f"validating this document takes more than {MAX_VALIDATION_WORK:,} steps, the most "
            "one document may take: fields that share a response name are compared in pairs, "
            "and fragments with each other; select each field once per selection set, use "
            "fewer fragments, and split the rest into several requests"
        )
        assert error["extensions"] == {
            "code": "BAD_USER_INPUT",
            "maxValidationWork": MAX_VALIDATION_WORK,
        }


async def test_the_field_limit_is_a_setting(start_gateway: GatewayFactory) -> None:
    gateway = await start_gateway(anonymous_agent="dev", max_fields=10)
    assert (await gateway.data(repeated(4, "agent")))["profile"]["v0"] == "dev"
    error = await gateway.error(repeated(10, "agent"))
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "maxFields": 10}


async def test_health_answers_while_documents_over_the_field_limit_arrive(crm: Gateway) -> None:
    token = (await mint(crm, "sales"))["sales"]
    slowest_refusal = 0.0

    async def oversized(variant: int) -> None:
        nonlocal slowest_refusal
        for round in range(3):
            started = time.monotonic()
            error = await crm.error(
                repeated(4_995, "lanes { lane }", variant * 10 + round), token=token
            )
            slowest_refusal = max(slowest_refusal, time.monotonic() - started)
            assert error["extensions"]["code"] == "BAD_USER_INPUT"

    async def health() -> float:
        slowest = 0.0
        for _ in range(20):
            started = time.monotonic()
            assert (await crm.client.get(crm.url + "/healthz")).status_code == 200
            slowest = max(slowest, time.monotonic() - started)
            await asyncio.sleep(0.02)
        return slowest

    results = await asyncio.gather(health(), *(oversized(n) for n in range(4)))
    # Validating each (as before) held the event loop for seconds per request, so a health
    # check behind the four waited several seconds; a loaded machine alone has taken 1.1 s.
    assert results[0] < 2.0, results[0]
    assert slowest_refusal < 5.0, slowest_refusal
