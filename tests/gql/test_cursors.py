"""Every field that takes a cursor refuses a malformed one as bad input, naming what a
cursor is, on the compiled path and the ordinary one alike; a good one still pages."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from store.reads.pages import encode_cursor
from tests.conftest import GatewayFactory
from tests.gql._api import ingest, unique
from tests.gql._feed import feed_client
from tests.support import Gateway

# Cursors of an event's position in the feed (audit, auditEvents).
BAD_POSITIONS = [
    "\u00b2",  # superscript two: str.isdigit() says yes, int() says no
    "\u2460",  # circled one: the same
    "\u0661",  # Arabic-Indic one: int() reads it as 1
    "\uff11",  # fullwidth one
    "",
    "-1",
    "+1",
    " 1",
    "1 ",
    "1\n",
    "1.0",
    "1e3",
    "9" * 19,
    "abc",
]
# Cursors of a page keyed by time and id (records, gather TIMELINE).
BAD_TIME_KEYS = [
    "\u00b2",
    "\u0661",
    "",
    "not base64!",
    encode_cursor(["0001-01-01T00:00:00+01:00", "sr_x"]),  # before year 1 in UTC
    encode_cursor(["9999-12-31T23:59:59-01:00", "sr_x"]),  # after year 9999 in UTC
    encode_cursor(["2026-01-01T00:00:00", "sr_x"]),  # no zone
    encode_cursor(["yesterday", "sr_x"]),
    encode_cursor(["2026-01-01T00:00:00+00:00", "sr_\u0000"]),  # NUL: not storable text
    encode_cursor(["2026-01-01T00:00:00+00:00", "\ud800"]),  # a lone surrogate
    encode_cursor(["2026-01-01T00:00:00+00:00"]),
    encode_cursor(["2026-01-01T00:00:00+00:00", 1]),
]
# Cursors of a page keyed by id (gather, members).
BAD_ID_KEYS = [
    "\u00b2",
    "\u0661",
    "",
    encode_cursor(["sr_\u0000"]),
    encode_cursor(["\udfff"]),
    encode_cursor(["a", "b"]),
    encode_cursor([None]),
    "W10",  # []
    "e30",  # {}
]

PAGE = "totalCount items { id } pageInfo { endCursor }"
KEYED = {
    "records": (f"query($after: String) {{ records(first: 1, after: $after) {{ {PAGE} }} }}", True),
    "gather TIMELINE": (
        f"query($after: String, $match: [String!]!) {{ gather(match: $match, mode: TIMELINE, "
        f"first: 1, after: $after) {{ {PAGE} }} }}",
        True,
    ),
    "gather": (
        f"query($after: String, $match: [String!]!) {{ gather(match: $match, first: 1, "
        f"after: $after) {{ {PAGE} }} }}",
        False,
    ),
    "edgeProperty members": (
        f"query($after: String, $property: String!) {{ edgeProperty(property: $property) "
        f"{{ members(first: 1, after: $after) {{ {PAGE} }} }} }}",
        False,
    ),
    "record edgeProperties members": (
        f"query($after: String, $id: ID!) {{ record(id: $id) {{ edgeProperties "
        f"{{ members(first: 1, after: $after) {{ {PAGE} }} }} }} }}",
        False,
    ),
    "group members": (
        f"query($after: String, $id: ID!) {{ record(id: $id) {{ groups "
        f"{{ members(first: 1, after: $after) {{ {PAGE} }} }} }} }}",
        False,
    ),
}
AUDIT = "query($after: String) { audit(first: 1, after: $after) { items { cursor } } }"
GROUP = 'mutation($ids: [ID!]!) { group(recordIds: $ids, hint: "pair") { id } }'


@pytest.fixture(scope="module", params=["compiled", "ordinary"])
async def world(
    request: pytest.FixtureRequest, start_gateway: GatewayFactory
) -> tuple[Gateway, dict[str, Any]]:
    gateway = await start_gateway(anonymous_agent="dev", compiled_path=request.param == "compiled")
    prop = f"topic:{unique()}"
    a = await ingest(gateway, "a", [prop])
    b = await ingest(gateway, "b", [prop])
    await gateway.data(GROUP, {"ids": [a["id"], b["id"]]})
    return gateway, {"match": [prop], "property": prop, "id": a["id"]}


def refused(body: dict[str, Any], cursor: str) -> str:
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT", (cursor, body)
    message: str = error["message"]
    return message


@pytest.mark.parametrize("field", sorted(KEYED))
async def test_a_malformed_page_cursor_is_refused(
    world: tuple[Gateway, dict[str, Any]], field: str, caplog: pytest.LogCaptureFixture
) -> None:
    gateway, variables = world
    query, by_time = KEYED[field]
    for cursor in BAD_TIME_KEYS if by_time else BAD_ID_KEYS:
        body = await gateway.post(query, {**variables, "after": cursor})
        message = refused(body, cursor)
        assert "is not one this list gave out" in message, (cursor, message)
        assert "endCursor" in message
    # Refused where it was read, not by a failure that fell back to the other path.
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    # A good cursor still pages: the first page's end leads to the second page.
    found = _page(await gateway.data(query, variables))
    assert found["totalCount"] >= 2 and found["pageInfo"]["endCursor"]
    second = _page(
        await gateway.data(query, {**variables, "after": found["pageInfo"]["endCursor"]})
    )
    assert second["items"] and second["items"][0]["id"] != found["items"][0]["id"]


def _page(data: Any) -> dict[str, Any]:
    """The one page inside a response's data, however deep."""
    while "totalCount" not in data:
        data = next(iter(data.values())) if isinstance(data, dict) else data[0]
    result: dict[str, Any] = data
    return result


async def test_a_malformed_audit_cursor_is_refused(world: tuple[Gateway, dict[str, Any]]) -> None:
    gateway, _ = world
    for cursor in BAD_POSITIONS:
        message = refused(await gateway.post(AUDIT, {"after": cursor}), cursor)
        assert "ASCII digits" in message, (cursor, message)
    items = (await gateway.data(AUDIT, {"after": "0"}))["audit"]["items"]
    assert items and items[0]["cursor"].isascii()


async def test_a_malformed_feed_cursor_is_refused(world: tuple[Gateway, dict[str, Any]]) -> None:
    gateway, _ = world
    async with feed_client(gateway) as client:
        for n, cursor in enumerate(BAD_POSITIONS):
            await client.subscribe(str(n), after=cursor)
            error = await client.error(str(n))
            assert error["extensions"]["code"] == "BAD_USER_INPUT", (cursor, error)
            assert "ASCII digits" in error["message"], (cursor, error)
        await client.subscribe("good", after="0")
        assert (await client.event("good"))["cursor"].isascii()
