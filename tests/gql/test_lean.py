"""The lean way of compiled reads (gql.server.lean) answers byte for byte as the gateway's
layers do: the same status line, header lines and body, and the same request log line."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from gql.api.observe import REQUEST_LOG
from gql.server import over_http
from tests.conftest import GatewayFactory
from tests.gql._api import INGEST
from tests.gql._policy_support import mint
from tests.support import Gateway

READ = "query R($id: ID!) { record(id: $id) { id content properties } }"
PAGE = (
    'query P($n: Int!) { records(first: $n, lane: "crm") '
    "{ items { id content } pageInfo { hasNextPage } } }"
)
TWO = "query A { labels { label } } query B($id: ID!) { record(id: $id) { id } }"
GRAPHQL_RESPONSE = "application/graphql-response+json"
# What differs between any two answers: the time they were made, the request's id.
DATE = re.compile(rb"^date: [^\r\n]*", re.MULTILINE | re.IGNORECASE)
REQUEST_ID = re.compile(rb'"requestId":\s*"[^"]*"')


class Raw:
    """An answer as the socket carried it: the head's lines (without `date`) and the body."""

    def __init__(self, head: bytes, body: bytes) -> None:
        self.head = DATE.sub(b"date: -", head)
        self.body = REQUEST_ID.sub(b'"requestId": "-"', body)
        self.status = int(head.split(b" ", 2)[1])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Raw) and (self.head, self.body) == (other.head, other.body)

    def __repr__(self) -> str:
        return f"Raw({self.head!r}, {self.body[:300]!r})"


async def exchange(gateway: Gateway, request: bytes) -> Raw:
    """One HTTP/1.1 request on its own connection; the answer as it was sent."""
    address = urlsplit(gateway.url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    try:
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(re.search(rb"(?im)^content-length: (\d+)", head)[1])  # type: ignore[index]
        body = await reader.readexactly(length)
    finally:
        writer.close()
    return Raw(head, body)


def post(
    payload: object, token: str | None = None, host: str = "127.0.0.1", **headers: str
) -> bytes:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    given = {name.replace("_", "-"): value for name, value in headers.items()}
    lines = {"host": host, "content-type": "application/json", **given}
    if token is not None:
        lines["authorization"] = f"Bearer {token}"
    lines["content-length"] = str(len(body))
    return _request("POST", "/graphql", lines, body)


def get(params: dict[str, str], token: str | None = None, **headers: str) -> bytes:
    lines = {"host": "127.0.0.1", **{n.replace("_", "-"): v for n, v in headers.items()}}
    if token is not None:
        lines["authorization"] = f"Bearer {token}"
    return _request("GET", "/graphql?" + urlencode(params), lines, b"")


def _request(method: str, target: str, headers: dict[str, str], body: bytes) -> bytes:
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"{method} {target} HTTP/1.1\r\n{head}\r\n".encode() + body


@contextmanager
def ordinary(gateway: Gateway) -> Iterator[None]:
    """The gateway without its lean path: every request through its layers."""
    lean, gateway.app.lean = gateway.app.lean, None
    try:
        yield
    finally:
        gateway.app.lean = lean


def log_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    found = [json.loads(r.getMessage()) for r in caplog.records if r.name == REQUEST_LOG]
    return [
        {k: v for k, v in line.items() if k not in ("time", "requestId", "durationMs")}
        for line in found
    ]


async def both(
    gateway: Gateway, request: bytes, caplog: pytest.LogCaptureFixture
) -> tuple[Raw, bool]:
    """The answer with the lean path and without (which must be the same bytes and log
    line), and whether the lean path answered it itself."""
    lean = gateway.app.lean
    assert lean is not None, "the lean path is off"
    caplog.clear()
    before = lean.answered
    with caplog.at_level(logging.INFO, logger=REQUEST_LOG):
        fast = await exchange(gateway, request)
        answered = lean.answered > before
        with ordinary(gateway):
            slow = await exchange(gateway, request)
    assert fast == slow, request
    first, second = log_lines(caplog)
    assert first == second, request
    return fast, answered


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> tuple[Gateway, str, str]:
    """A gateway with the example policy, a sales token and a record in its lane."""
    gateway = await start_gateway(policy_yaml=crm_yaml)
    token = (await mint(gateway, "sales"))["sales"]
    written = await gateway.data(
        INGEST,
        {
            "input": {
                "content": "lean",
                "lane": "crm",
                "sourceType": "contact",
                "properties": ["org:Acme"],
            }
        },
        token,
    )
    return gateway, token, written["ingest"]["id"]


async def test_compiled_reads_are_answered_by_the_lean_path_as_by_the_layers(
    crm: tuple[Gateway, str, str], caplog: pytest.LogCaptureFixture
) -> None:
    gateway, token, record = crm
    reads = [
        post({"query": READ, "variables": {"id": record}}, token),
        post({"query": READ, "variables": {"id": record}}, token, accept=GRAPHQL_RESPONSE),
        post({"query": READ, "variables": {"id": "sr_" + "0" * 32}}, token),
        post({"query": PAGE, "variables": {"n": 2}}, token),
        post({"query": TWO, "variables": {"id": record}, "operationName": "B"}, token),
        get({"query": READ, "variables": json.dumps({"id": record})}, token),
        post({"query": "{ __typename }"}, token),
    ]
    for request in reads:
        answer, answered = await both(gateway, request, caplog)
        assert answer.status == 200 and answered, answer
    # What the compiled path's answers carry, all of it.
    media = over_http.JSON.encode()
    assert answer.head.split(b"\r\n")[1:-2] == [
        b"date: -",
        b"server: uvicorn",
        *(b"%s: %s" % line for line in over_http.answer_headers(answer.body, over_http.JSON)),
    ]
    assert b"content-type: " + media in answer.head


async def test_everything_else_goes_through_the_layers_as_before(
    crm: tuple[Gateway, str, str], caplog: pytest.LogCaptureFixture
) -> None:
    gateway, token, record = crm
    others = {
        # Refused callers: no token, an unknown one.
        401: post({"query": READ, "variables": {"id": record}}),
        # Not compiled: a document that does not validate, one the path does not cover.
        200: post({"query": "{ nope }"}, token),
        # Not JSON, or not an object.
        400: post(b"{not json", token),
        # A host the gateway does not serve.
        403: post({"query": READ, "variables": {"id": record}}, token, host="attacker.example"),
        # Too many values.
        413: post({"query": READ, "variables": {"id": record, "x": list(range(2001))}}, token),
    }
    for status, request in others.items():
        answer, answered = await both(gateway, request, caplog)
        assert answer.status == status and not answered, answer
    for request in [
        post({"query": "{ labels { label } }"}, "elt_not-a-token"),
        post({"query": READ, "variables": {"id": record}}, token, content_type="text/plain"),
        post({"query": "{ nope }"}, token, accept=GRAPHQL_RESPONSE),
        get({"query": READ, "variables": "{not json"}, token),
        get({}, accept="text/html"),
        _request("PUT", "/graphql", {"host": "127.0.0.1", "content-length": "0"}, b""),
    ]:
        answer, answered = await both(gateway, request, caplog)
        assert not answered, answer
