"""The request log: one JSON line per request, whose id every error the client gets carries."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from typing import Any

import asyncpg
import pytest

from gql.api.errors import MASKED_MESSAGE
from gql.api.observe import REQUEST_LOG, LineSink, new_note
from tests.conftest import GatewayFactory
from tests.gql._api import INGEST, unique
from tests.gql._feed import feed_client
from tests.gql._policy_support import mint
from tests.support import Gateway, plain

FIELDS = {
    "time",
    "requestId",
    "operation",
    "operationName",
    "agent",
    "path",
    "route",
    "durationMs",
    "status",
    "code",
}


def lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    found = [json.loads(r.getMessage()) for r in caplog.records if r.name == REQUEST_LOG]
    for line in found:
        assert set(line) == FIELDS, line
    return found


def line_of(caplog: pytest.LogCaptureFixture, request_id: str) -> dict[str, Any]:
    [line] = [line for line in lines(caplog) if line["requestId"] == request_id]
    return line


async def test_a_refused_request_is_found_in_the_log_by_its_error(
    start_gateway: GatewayFactory, crm_yaml: str, caplog: pytest.LogCaptureFixture
) -> None:
    crm = await start_gateway(policy_yaml=crm_yaml)
    secret = "elt_" + unique("not-a-token-")
    content = unique("never-logged-")
    with caplog.at_level(logging.INFO, logger=REQUEST_LOG):
        response = await crm.client.post(
            crm.graphql_url,
            json={"query": INGEST, "variables": {"input": {"content": content, "lane": "notes"}}},
            headers={"authorization": f"Bearer {secret}"},
        )
    assert response.status_code == 401
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "UNAUTHENTICATED"
    line = line_of(caplog, error["extensions"]["requestId"])
    assert line["status"] == 401 and line["code"] == "UNAUTHENTICATED", line
    assert line["path"] == "/graphql" and line["agent"] is None and line["route"] is None, line
    assert line["durationMs"] >= 0
    text = caplog.text
    assert secret not in text and content not in text

    # A refusal by the guard, after the agent is known.
    token = (await mint(crm, "sales"))["sales"]
    with caplog.at_level(logging.INFO, logger=REQUEST_LOG):
        response = await crm.client.post(
            crm.graphql_url,
            json={
                "query": INGEST,
                "operationName": None,
                "variables": {"input": {"content": content, "lane": "notes"}},
            },
            headers={"authorization": f"Bearer {token}"},
        )
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "FORBIDDEN", error
    line = line_of(caplog, error["extensions"]["requestId"])
    assert line["status"] == 200 and line["code"] == "FORBIDDEN", line
    assert (line["agent"], line["operation"]) == ("sales", "ingest"), line
    assert token not in caplog.text and content not in caplog.text


async def test_a_masked_failure_is_found_in_the_log_by_its_error(
    start_gateway: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = await start_gateway(anonymous_agent="dev")
    admin = await asyncpg.connect(plain(gateway.database_url))
    await admin.execute("ALTER TABLE records RENAME TO records_away")
    try:
        with caplog.at_level(logging.INFO):
            response = await gateway.client.post(
                gateway.graphql_url,
                json={"query": "query Count { records { totalCount } }", "operationName": "Count"},
            )
    finally:
        await admin.execute("ALTER TABLE records_away RENAME TO records")
        await admin.close()
    [error] = response.json()["errors"]
    assert error["message"] == MASKED_MESSAGE
    request_id = error["extensions"]["requestId"]
    line = line_of(caplog, request_id)
    assert line["code"] == "INTERNAL_SERVER_ERROR" and line["status"] == 200, line
    assert (line["operation"], line["operationName"], line["agent"]) == ("records", "Count", "dev")
    # The compiled read failed, and the ordinary path answered (and failed) in its place.
    assert line["route"] == "ordinary", line
    # The traceback's record names the same request.
    [failure] = [r for r in caplog.records if r.name == "edgeloom.errors"]
    assert request_id in failure.getMessage() and failure.exc_info is not None


async def test_each_request_logs_one_line_naming_its_path(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    content = unique("content-")
    with caplog.at_level(logging.INFO, logger=REQUEST_LOG):
        written = await gateway.post(INGEST, {"input": {"content": content, "properties": []}})
        read = await gateway.post("{ records(first: 1) { totalCount } }")
        ordinary = await gateway.post("{ profile { agent } policy { version } }")
        health = await gateway.client.get(gateway.url + "/healthz")
    assert "errors" not in written and "errors" not in read and "errors" not in ordinary
    assert health.status_code == 200
    found = lines(caplog)
    assert [(line["path"], line["operation"], line["route"]) for line in found] == [
        ("/graphql", "ingest", "compiled"),
        ("/graphql", "records", "compiled"),
        ("/graphql", "multiple", "ordinary"),
        ("/healthz", None, None),
    ], found
    assert all(line["agent"] == "dev" for line in found[:3])
    assert all(line["status"] == 200 and line["code"] is None for line in found)
    assert len({line["requestId"] for line in found}) == 4
    assert content not in caplog.text


async def test_an_error_over_websocket_carries_its_connection_s_id(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=REQUEST_LOG):
        async with feed_client(gateway) as client:
            await client.subscribe("kinds", kinds=["record_deleted"])
            error = await client.error("kinds")
        request_id = error["extensions"]["requestId"]
        # Logged when the server has closed its side, a moment after the client.
        for _ in range(100):
            if any(line["requestId"] == request_id for line in lines(caplog)):
                break
            await asyncio.sleep(0.05)
    line = line_of(caplog, request_id)
    assert line["status"] == 101 and line["path"] == "/graphql", line
    assert line["agent"] == "dev" and line["code"] == "BAD_USER_INPUT", line


def test_a_sampling_log_keeps_every_failed_and_slow_request_and_one_in_n_others() -> None:
    stream = io.BytesIO()
    sink = LineSink(stream, every=3, slow=0.5)
    ended = [
        (200, None, 0.01, "a"),
        (200, None, 0.01, "b"),
        (200, None, 0.01, "c"),  # the third answered quickly: logged
        (200, "FORBIDDEN", 0.01, "d"),  # an error in a 200 answer
        (413, None, 0.01, "e"),
        (200, None, 0.6, "f"),  # slow
        (0, None, 0.01, "g"),  # never answered (the client left)
        (200, None, 0.01, "h"),
        (200, None, 0.01, "i"),
        (200, None, 0.01, "j"),  # the sixth answered quickly
    ]
    for status, code, seconds, name in ended:
        note = new_note("/graphql", 0.0)
        note.status, note.code, note.operation_name = status, code, name
        sink.add(note, seconds)  # no loop running: written at once
    logged = [json.loads(line)["operationName"] for line in stream.getvalue().splitlines()]
    assert logged == ["c", "d", "e", "f", "g", "j"]


def test_a_log_of_every_request_keeps_each_one() -> None:
    stream = io.BytesIO()
    sink = LineSink(stream)
    for _ in range(5):
        note = new_note("/graphql", 0.0)
        note.status = 200
        sink.add(note, 0.001)
    assert len(stream.getvalue().splitlines()) == 5
