"""What a WebSocket does with messages it cannot take: malformed ones close with 4400, big
ones with 1009 before they are decoded, and oversized variables are refused by name."""

from __future__ import annotations

import json
import logging
import time

import pytest
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from gql.api.limits import DEFAULT_MAX_BODY, MAX_LIST_ITEMS, MAX_VECTOR_ITEMS
from tests.gql._api import INGEST_MANY
from tests.gql.test_websocket_auth import init, receive, run
from tests.support import Gateway, no_request_id

MALFORMED: list[str | bytes] = [
    "not json",
    b'{"type": "ping"}',  # a binary frame
    "[" * 100_000,
    '"a string"',
    "[1]",
    "5",
    '{"type": 5}',
    '{"type": "subscribe", "id": "1", "payload": "x"}',
    '{"type": "subscribe", "id": "1"}',
    '{"type": "subscribe", "id": "1", "payload": {"query": 5}}',
    '{"type": "subscribe", "id": "1", "payload": {"query": "{ labels { id } }", "variables": 5}}',
    '{"type": "subscribe", "id": 1, "payload": {"query": "{ labels { label } }"}}',
    '{"type": "subscribe", "id": "", "payload": {"query": "{ labels { label } }"}}',
    '{"type": "complete"}',
]


async def closed_with(ws: ClientConnection) -> int:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            await receive(ws)
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code


@pytest.mark.parametrize("text", MALFORMED)
async def test_a_malformed_message_closes_with_4400(
    gateway: Gateway, text: str | bytes, caplog: pytest.LogCaptureFixture
) -> None:
    async with await init(gateway) as ws:
        assert (await receive(ws))["type"] == "connection_ack"
        await ws.send(text)
        assert await closed_with(ws) == 4400
    # Closed by the protocol, not by an exception in the ASGI application.
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_a_message_over_the_body_size_closes_with_1009_undecoded(gateway: Gateway) -> None:
    inputs = [{"content": "x" * 100}] * 140_000  # about 14 MB of JSON
    message = json.dumps(
        {
            "id": "1",
            "type": "subscribe",
            "payload": {"query": INGEST_MANY, "variables": {"inputs": inputs}},
        }
    )
    assert len(message) > DEFAULT_MAX_BODY
    async with await init(gateway) as ws:
        assert (await receive(ws))["type"] == "connection_ack"
        started = time.monotonic()
        await ws.send(message)
        assert await closed_with(ws) == 1009
        assert time.monotonic() - started < 10
    # the gateway goes on serving
    async with await init(gateway) as ws:
        assert (await receive(ws))["type"] == "connection_ack"
        assert (await run(ws, "1", "{ labels { label } }"))["data"] is not None


async def test_oversized_variables_are_refused_and_the_socket_stays(gateway: Gateway) -> None:
    async with await init(gateway) as ws:
        assert (await receive(ws))["type"] == "connection_ack"
        variables = {"inputs": [{"content": "x"}] * (MAX_LIST_ITEMS + 1)}
        await ws.send(
            json.dumps(
                {
                    "id": "big",
                    "type": "subscribe",
                    "payload": {"query": INGEST_MANY, "variables": variables},
                }
            )
        )
        error = await receive(ws)
        assert error["id"] == "big" and error["type"] == "error", error
        [refusal] = error["payload"]
        assert no_request_id(refusal)["extensions"] == {
            "code": "BAD_USER_INPUT",
            "maxListItems": MAX_LIST_ITEMS,
            "maxVectorItems": MAX_VECTOR_ITEMS,
        }
        assert "at most 1000" in refusal["message"]
        assert (await run(ws, "2", "{ labels { label } }"))["data"] is not None


TWO_ANONYMOUS = "{ profile { agent } } { labels { label } }"


async def test_two_anonymous_operations_are_refused_not_the_first_run(gateway: Gateway) -> None:
    body = await gateway.post(TWO_ANONYMOUS)
    assert body.get("data") is None, body
    assert {e["message"] for e in body["errors"]} == {
        "This anonymous operation must be the only defined operation."
    }
    async with await init(gateway) as ws:
        assert (await receive(ws))["type"] == "connection_ack"
        await ws.send(
            json.dumps({"id": "1", "type": "subscribe", "payload": {"query": TWO_ANONYMOUS}})
        )
        error = await receive(ws)
        assert (error["id"], error["type"]) == ("1", "error"), error
        assert all(e["extensions"]["code"] == "BAD_USER_INPUT" for e in error["payload"])
