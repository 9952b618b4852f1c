"""Subscriptions as server-sent events (GraphQL over SSE, "distinct connections": one POST
with `Accept: text/event-stream` per subscription), over a real socket with an SSE client:
the same guard, filters, resume and limits as over graphql-transport-ws."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx_sse
import pytest

from tests.conftest import GatewayFactory
from tests.gql._policy_support import mint
from tests.support import Gateway, without_request_ids

TIMEOUT = 10
EVENTS = """subscription ($after: String, $lanes: [String!], $match: [String!], $ids: [ID!]) {
  auditEvents(after: $after, lanes: $lanes, match: $match, recordIds: $ids) {
    cursor kind recordId lane } }"""
INGEST = "mutation ($input: IngestInput!) { ingest(input: $input) { id } }"


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml, max_ws_connections=3)


@pytest.fixture(scope="module")
async def tokens(crm: Gateway) -> dict[str, str]:
    return await mint(crm, "planner", "sales")


class Stream:
    """One subscription's event stream: its response, and its events as they come."""

    def __init__(self, source: httpx_sse.EventSource) -> None:
        self.response = source.response
        self._events = source.aiter_sse()

    async def next(self) -> tuple[str, Any]:
        """The next event's name and decoded data (None for `complete`)."""
        event = await asyncio.wait_for(anext(self._events), TIMEOUT)
        return event.event, json.loads(event.data) if event.data else None

    async def payload(self) -> dict[str, Any]:
        """The data of the next `next` event, which must carry no errors."""
        name, body = await self.next()
        assert name == "next" and "errors" not in body, body
        result: dict[str, Any] = body["data"]
        return result


@asynccontextmanager
async def stream(
    gateway: Gateway, query: str, token: str | None = None, **variables: Any
) -> AsyncIterator[Stream]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx.AsyncClient(timeout=TIMEOUT) as client,
        httpx_sse.aconnect_sse(
            client,
            "POST",
            gateway.graphql_url,
            json={"query": query, "variables": variables},
            headers=headers,
        ) as source,
    ):
        yield Stream(source)


async def ingest(gateway: Gateway, token: str, **fields: Any) -> str:
    record_id: str = (await gateway.data(INGEST, {"input": fields}, token))["ingest"]["id"]
    return record_id


async def test_events_replay_from_a_cursor_then_go_live_and_resume(
    crm: Gateway, tokens: dict[str, str]
) -> None:
    sales = tokens["sales"]
    first = await ingest(crm, sales, content="Deal opened.", lane="crm", sourceType="deal")
    async with stream(crm, EVENTS, sales, after="0", ids=[first]) as events:
        assert events.response.headers["content-type"].startswith("text/event-stream")
        replayed = (await events.payload())["auditEvents"]
        assert (replayed["kind"], replayed["recordId"]) == ("sr_ingested", first)
        await crm.data(
            'mutation ($id: ID!) { update(id: $id, content: "Deal won.") { id } }',
            {"id": first},
            sales,
        )
        live = (await events.payload())["auditEvents"]
        assert (live["kind"], live["recordId"]) == ("sr_updated", first)
    await crm.data(
        'mutation ($id: ID!) { addProperties(id: $id, properties: ["org:Acme"]) { added } }',
        {"id": first},
        sales,
    )
    # Resumed after the last event seen: what came while away, and nothing before it.
    async with stream(crm, EVENTS, sales, after=replayed["cursor"], ids=[first]) as events:
        assert (await events.payload())["auditEvents"]["cursor"] == live["cursor"]
        missed = (await events.payload())["auditEvents"]
        assert (missed["kind"], missed["recordId"]) == ("property_added", first)


async def test_match_narrows_the_stream_to_what_the_caller_works_on(
    crm: Gateway, tokens: dict[str, str]
) -> None:
    sales = tokens["sales"]
    async with stream(crm, EVENTS, sales, match=["org:Initech"]) as events:
        await ingest(crm, sales, content="Other.", lane="crm", sourceType="deal")
        wanted = await ingest(
            crm,
            sales,
            content="Initech.",
            lane="crm",
            sourceType="deal",
            properties=["org:Initech"],
        )
        assert (await events.payload())["auditEvents"]["recordId"] == wanted


async def test_a_lane_the_caller_cannot_read_is_refused_naming_those_it_can(
    crm: Gateway, tokens: dict[str, str]
) -> None:
    async with stream(crm, EVENTS, tokens["sales"], lanes=["notes"]) as events:
        assert events.response.status_code == 200
        name, body = await events.next()
        assert name == "next" and body["data"] is None
        [error] = without_request_ids(body)["errors"]
        assert error == {
            "message": "lane(s) ['notes'] are not readable by agent 'sales'; "
            "readable lanes: ['crm']",
            "extensions": {"code": "BAD_USER_INPUT", "allowed": ["crm"]},
        }
        assert await events.next() == ("complete", None)


async def test_no_token_or_a_bad_one_is_answered_401_before_any_stream(crm: Gateway) -> None:
    for token in (None, "not-a-token"):
        headers = {"accept": "text/event-stream"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        response = await crm.client.post(crm.graphql_url, json={"query": EVENTS}, headers=headers)
        assert response.status_code == 401, response.text
        [error] = without_request_ids(response.json())["errors"]
        assert error["extensions"]["code"] == "UNAUTHENTICATED"


async def test_watch_streams_a_gathers_membership(crm: Gateway, tokens: dict[str, str]) -> None:
    sales = tokens["sales"]
    held = await ingest(
        crm, sales, content="Held.", lane="crm", sourceType="deal", properties=["topic:sse"]
    )
    query = """subscription { watch(match: ["topic:sse"], initial: true) {
        change record { id } } }"""
    async with stream(crm, query, sales) as changes:
        assert (await changes.payload())["watch"] == {"change": "JOINED", "record": {"id": held}}
        joined = await ingest(
            crm, sales, content="Joins.", lane="crm", sourceType="deal", properties=["topic:sse"]
        )
        assert (await changes.payload())["watch"] == {"change": "JOINED", "record": {"id": joined}}


async def test_streams_count_against_the_connection_cap(
    crm: Gateway, tokens: dict[str, str]
) -> None:
    sockets = crm.app.sockets
    async with stream(crm, EVENTS, tokens["sales"]), stream(crm, EVENTS, tokens["planner"]):
        async with stream(crm, EVENTS, tokens["sales"]):
            assert sockets.open == 3
            response = await crm.client.post(
                crm.graphql_url,
                json={"query": EVENTS},
                headers={
                    "accept": "text/event-stream",
                    "authorization": f"Bearer {tokens['sales']}",
                },
            )
            assert response.status_code == 503 and response.headers["retry-after"] == "5"
            [error] = without_request_ids(response.json())["errors"]
            assert error["extensions"] == {"code": "SERVICE_UNAVAILABLE", "maxConnections": 3}
            assert "3 WebSocket and event-stream connections are open" in error["message"]
        # A stream the client closed gives its place back.
        for _ in range(100):
            if sockets.open == 2:
                break
            await asyncio.sleep(0.05)
        assert sockets.open == 2
        async with stream(crm, EVENTS, tokens["sales"]) as again:
            assert again.response.status_code == 200
