"""Refusals and failures over HTTP: codes and sentences, never stack traces or SQL."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from gql.api.errors import MASKED_MESSAGE
from tests.conftest import GatewayFactory
from tests.gql._api import GATHER, INGEST, UPDATE, gather_ids, ingest, record_total, unique
from tests.support import Gateway, no_request_id, plain

CODES = {"BAD_USER_INPUT", "UNAUTHENTICATED", "FORBIDDEN", "NOT_FOUND", "CONFLICT", "AMBIGUOUS_ID"}
LEAKS = ("traceback", "sqlalchemy", "asyncpg", "select ", "insert into", 'file "', "psycopg")
MAX_BODY = 8 * 1024 * 1024


def assert_no_leak(text: str) -> None:
    lowered = text.lower()
    for word in LEAKS:
        assert word not in lowered, (word, text[:500])


async def post_raw(
    gateway: Gateway, body: bytes, content_type: str = "application/json"
) -> httpx.Response:
    return await gateway.client.post(
        gateway.graphql_url, content=body, headers={"content-type": content_type}
    )


async def test_refusals_carry_a_code_and_a_sentence(gateway: Gateway) -> None:
    record = await ingest(gateway, "v1")
    await gateway.data(UPDATE, {"id": record["id"], "content": "v2"})
    refused = [
        ("{ nope }", {}, "BAD_USER_INPUT"),
        ("{ records { items { nope } } }", {}, "BAD_USER_INPUT"),
        ("{ records(nope: 1) { totalCount } }", {}, "BAD_USER_INPUT"),
        ("{ records { totalCount }", {}, "BAD_USER_INPUT"),
        ("{" * 3000 + "}" * 3000, {}, "BAD_USER_INPUT"),
        ("{ labels { " + "label " * 20_001 + "} }", {}, "BAD_USER_INPUT"),
        ("query($n: Int) { records(first: $n) { totalCount } }", {"n": "ten"}, "BAD_USER_INPUT"),
        (INGEST, {"input": {"properties": ["org:x"]}}, "BAD_USER_INPUT"),
        (INGEST, {"input": {"content": "x", "sourceType": "meeting"}}, "BAD_USER_INPUT"),
        (UPDATE, {"id": "sr_" + "f" * 32, "content": "x"}, "NOT_FOUND"),
        (UPDATE, {"id": record["id"], "content": "x", "expectedVersion": 1}, "CONFLICT"),
        (GATHER, {"match": ["org:x"], "first": 9999}, "BAD_USER_INPUT"),
        ('{ record(id: "sr_12") { id } }', {}, "BAD_USER_INPUT"),
    ]
    for query, variables, code in refused:
        response = await gateway.client.post(
            gateway.graphql_url, json={"query": query, "variables": variables}
        )
        assert_no_leak(response.text)
        errors = response.json()["errors"]
        assert len(errors) == 1, (query, errors)
        error = errors[0]
        assert error["extensions"]["code"] == code, (query, error)
        assert error["extensions"]["code"] in CODES
        message = error["message"]
        assert len(message.split()) >= 4, message
        assert message != MASKED_MESSAGE


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{not json", "application/json"),
        (b"", "application/json"),
        (b'{"query": 5}', "application/json"),
        (b"{}", "application/json"),
        (b"[]", "application/json"),
        (b'"just a string"', "application/json"),
        (b"query=x", "text/plain"),
        (b'\xff\xfe{"query": "{ labels { label } }"}', "application/json"),
        (b'{"query": "{ labels { label } }", "variables": [1]}', "application/json"),
    ],
)
async def test_a_malformed_request_body_is_a_json_error(
    gateway: Gateway, body: bytes, content_type: str
) -> None:
    response = await post_raw(gateway, body, content_type)
    assert 400 <= response.status_code < 500
    assert response.headers["content-type"].startswith("application/json")
    assert_no_leak(response.text)
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert len(error["message"].split()) >= 4, error


async def test_an_oversize_body_is_refused_with_413_and_json(gateway: Gateway) -> None:
    records = await record_total(gateway)
    content = "x" * (MAX_BODY + 1)
    response = await gateway.client.post(
        gateway.graphql_url,
        json={"query": INGEST, "variables": {"input": {"content": content}}},
    )
    assert response.status_code == 413
    assert response.headers["content-type"].startswith("application/json")
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["extensions"]["maxBytes"] == MAX_BODY
    assert str(MAX_BODY) in error["message"]
    assert_no_leak(response.text)
    assert await record_total(gateway) == records


async def test_an_oversize_body_without_a_length_is_refused_too(gateway: Gateway) -> None:
    records = await record_total(gateway)
    head = json.dumps({"query": INGEST, "variables": {"input": {"content": "@"}}}).encode()
    before, after = head.split(b"@")
    chunk = b"y" * (1024 * 1024)

    async def stream() -> AsyncIterator[bytes]:
        yield before
        for _ in range(9):
            yield chunk
        yield after

    response = await gateway.client.post(
        gateway.graphql_url, content=stream(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert response.json()["errors"][0]["extensions"]["maxBytes"] == MAX_BODY
    assert await record_total(gateway) == records
    # The gateway still answers.
    assert await record_total(gateway) == records


async def test_content_over_the_limit_is_refused_by_name(gateway: Gateway) -> None:
    records = await record_total(gateway)
    error = await gateway.error(INGEST, {"input": {"content": "z" * 1_000_001}})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "1000001" in error["message"]
    assert "at most 1000000" in error["message"]
    assert await record_total(gateway) == records


def raw_json(query: str, variables: dict[str, Any], escapes: dict[str, str]) -> bytes:
    """A body whose strings carry escapes (\\u0000, lone surrogates) a client may send."""
    text = json.dumps({"query": query, "variables": variables})
    for marker, escape in escapes.items():
        text = text.replace(marker, escape)
    return text.encode()


@pytest.mark.parametrize("escape", ["\\u0000", "\\ud800"])
async def test_text_postgres_cannot_store_is_refused_not_a_failure(
    gateway: Gateway, escape: str
) -> None:
    records = await record_total(gateway)
    tag = f"tag:{unique()}"
    inputs = [
        {"content": "a@b", "properties": [tag]},
        {"content": "fine", "properties": [tag, "org:a@b"]},
        {"content": "fine", "properties": [tag], "idempotencyKey": "k@"},
    ]
    for variables in inputs:
        body = raw_json(INGEST, {"input": variables}, {"@": escape})
        response = await post_raw(gateway, body)
        assert_no_leak(response.text)
        [error] = response.json()["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT", (variables, error)
        assert "U+0000" in error["message"]
    assert await gather_ids(gateway, [tag]) == []
    assert await record_total(gateway) == records

    body = raw_json(GATHER, {"match": ["org:a@b"]}, {"@": escape})
    response = await post_raw(gateway, body)
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT", error


@pytest.mark.parametrize(
    "as_of", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "2026-01-01T00:00:00"]
)
async def test_a_point_in_time_out_of_range_is_refused(gateway: Gateway, as_of: str) -> None:
    record = await ingest(gateway, "x", ["t:when"])
    for query, variables in (
        (
            "query($id: ID!, $a: DateTime) { record(id: $id, asOf: $a) { id } }",
            {"id": record["id"]},
        ),
        (GATHER, {"match": ["t:when"]}),
    ):
        body = await gateway.post(
            query.replace("$asOf", "$a"), {**variables, "a": as_of, "asOf": as_of}
        )
        assert_no_leak(json.dumps(body))
        [error] = body["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT", error
        assert "DateTime" in error["message"]


def cursor(key: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


async def test_a_forged_cursor_is_refused_not_a_failure(gateway: Gateway) -> None:
    await ingest(gateway, "x", ["t:cursor"])
    forged = [
        ('{ records(after: "%s") { totalCount } }', ["2026-01-01T00:00:00+00:00", 5]),
        ('{ records(after: "%s") { totalCount } }', [None, "sr_x"]),
        ('{ records(after: "%s") { totalCount } }', ["yesterday", "sr_x"]),
        # a time without a zone cannot be compared with the stored ones
        ('{ records(after: "%s") { totalCount } }', ["2026-01-01T00:00:00", "sr_x"]),
        (
            '{ gather(match: ["t:cursor"], mode: TIMELINE, after: "%s") { totalCount } }',
            ["2026-01-01 00:00", "sr_x"],
        ),
        ('{ gather(match: ["t:cursor"], after: "%s") { totalCount } }', [5]),
        ('{ gather(match: ["t:cursor"], after: "%s") { totalCount } }', [{"a": 1}]),
        ('{ gather(match: ["t:cursor"], mode: TIMELINE, after: "%s") { totalCount } }', [1, 2]),
    ]
    for query, key in forged:
        body = await gateway.post(query % cursor(key))
        assert_no_leak(json.dumps(body))
        [error] = body["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT", (key, error)
        assert "cursor" in error["message"]


async def test_an_internal_failure_is_masked_and_logged(
    start_gateway: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = await start_gateway(anonymous_agent="dev")
    for _ in range(3):
        await ingest(gateway, "warm the pool")
    # Take the table away under the gateway: its next query fails inside the server.
    # (Cutting its connections is not enough: the read pool reconnects transparently.)
    admin = await asyncpg.connect(plain(gateway.database_url))
    await admin.execute("ALTER TABLE records RENAME TO records_away")

    with caplog.at_level(logging.ERROR, logger="edgeloom.errors"):
        response = await gateway.client.post(
            gateway.graphql_url, json={"query": "{ records { totalCount } }"}
        )
    assert response.status_code == 200
    assert_no_leak(response.text)
    [error] = response.json()["errors"]
    assert error["message"] == MASKED_MESSAGE
    assert no_request_id(error)["extensions"] == {"code": "INTERNAL_SERVER_ERROR"}
    assert set(error) <= {"message", "locations", "path", "extensions"}
    logged = [r for r in caplog.records if r.name == "edgeloom.errors"]
    assert logged and logged[0].exc_info is not None

    try:
        await admin.execute("ALTER TABLE records_away RENAME TO records")
    finally:
        await admin.close()
    # The pool recovers: a later call succeeds.
    for _ in range(5):
        body = await gateway.post("{ records { totalCount } }")
        if not body.get("errors"):
            break
    assert body["data"]["records"]["totalCount"] == 3


async def test_get_runs_queries_and_refuses_mutations_as_json(gateway: Gateway) -> None:
    response = await gateway.client.get(
        gateway.graphql_url,
        params={"query": "{ records(first: 1) { totalCount } }"},
        headers={"accept": "application/json"},
    )
    assert response.status_code == 200
    assert "records" in response.json()["data"]

    records = await record_total(gateway)
    response = await gateway.client.get(
        gateway.graphql_url,
        params={"query": 'mutation { ingest(input: {content: "via GET"}) { id } }'},
        headers={"accept": "application/json"},
    )
    assert 400 <= response.status_code < 500
    assert response.headers["content-type"].startswith("application/json")
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "mutation" in error["message"].lower()
    assert await record_total(gateway) == records

    response = await gateway.client.put(gateway.graphql_url, json={"query": "{ labels { label } }"})
    assert response.status_code == 405


async def test_unknown_audit_kinds_are_refused_naming_the_known_ones(gateway: Gateway) -> None:
    error = await gateway.error('{ audit(kinds: ["sr_ingested", "typo"]) { totalCount } }')
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"].startswith("unknown event kind(s) ['typo']; the kinds are [")
    assert "sr_ingested" in error["extensions"]["allowed"]


async def test_a_malformed_audit_event_id_is_refused_not_missing(gateway: Gateway) -> None:
    error = await gateway.error('{ auditEvent(id: "ae_nope") { id } }')
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "'ae_nope' is not a valid id; expected 'ae_' followed by 32 hex" in error["message"]
    trailing = await gateway.error(
        '{ auditEvent(id: "ae_00000000000000000000000000000000\\n") { id } }'
    )
    assert trailing["extensions"]["code"] == "BAD_USER_INPUT", trailing
    missing = await gateway.data('{ auditEvent(id: "ae_00000000000000000000000000000000") { id } }')
    assert missing["auditEvent"] is None
