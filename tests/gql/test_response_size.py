"""A response holds at most `max_response_bytes`: over it, refused before its content is read,
on the compiled path (one statement) and on the ordinary one (strawberry's resolvers)."""

from __future__ import annotations

from typing import Any

import pytest

from store.errors import ResponseTooLargeError
from store.kinds.record import queries
from store.reads.lane_floor import Lanes, login_role, settings_sql
from tests.conftest import DEV, GatewayFactory
from tests.gql._differential import compiled_path
from tests.support import Gateway

LIMIT = 1_000_000
RECORD_BYTES = 300_000  # three fit in the limit, four do not

GATHER = """
query($first: Int) { gather(match: ["topic:big"], first: $first) { items { id content } } }
"""
# A directive is not compiled: the same read through strawberry's resolvers.
GATHER_ORDINARY = """
query($first: Int) {
  gather(match: ["topic:big"], first: $first) { items { id content @include(if: true) } }
}
"""
TWO_GATHERS = """
{ a: gather(match: ["topic:big"], first: 2) { items { content } }
  b: gather(match: ["topic:big"], first: 2) { items { content } } }
"""
TWO_GATHERS_ORDINARY = TWO_GATHERS.replace("{ content }", "{ content @include(if: true) }")
REFUSAL = {
    "data": None,
    "errors": [
        {
            "message": (
                "this response would hold more than 1,000,000 bytes, the most one response "
                "may hold; ask for less per request and page through the rest: a smaller "
                "first:, fewer aliases, or fewer fields (content and versions are the large ones)"
            ),
            "extensions": {"code": "BAD_USER_INPUT", "limit": LIMIT},
        }
    ],
}


@pytest.fixture(scope="module")
async def small(start_gateway: GatewayFactory) -> Gateway:
    """A gateway whose responses hold at most 1 MB, with six records of 300 KB."""
    gateway = await start_gateway(anonymous_agent=DEV, max_response_bytes=LIMIT)
    for n in range(6):
        await gateway.data(
            'mutation($c: String!) { ingest(input: {content: $c, properties: ["topic:big"]}) '
            "{ id } }",
            {"c": str(n) * RECORD_BYTES},
        )
    return gateway


async def answered(gateway: Gateway, query: str, **variables: Any) -> tuple[dict[str, Any], bool]:
    """The response body, and whether the compiled path answered it."""
    path = compiled_path(gateway)
    before = path.answered
    body = await gateway.post(query, variables)
    return body, path.answered > before


@pytest.mark.parametrize("query", [GATHER, GATHER_ORDINARY], ids=["compiled", "ordinary"])
async def test_a_response_within_the_limit_is_answered(small: Gateway, query: str) -> None:
    body, compiled = await answered(small, query, first=3)
    assert compiled is (query == GATHER)
    assert "errors" not in body, body["errors"]
    items = body["data"]["gather"]["items"]
    assert [len(item["content"]) for item in items] == [RECORD_BYTES] * 3


@pytest.mark.parametrize(
    ("query", "variables", "on_compiled_path"),
    [
        (GATHER, {"first": 4}, True),
        (GATHER_ORDINARY, {"first": 4}, False),
        (TWO_GATHERS, {}, True),
        (TWO_GATHERS_ORDINARY, {}, False),
    ],
    ids=["compiled", "ordinary", "compiled-aliases", "ordinary-aliases"],
)
async def test_a_response_over_the_limit_is_refused_naming_it(
    small: Gateway, query: str, variables: dict[str, Any], on_compiled_path: bool
) -> None:
    body, compiled = await answered(small, query, **variables)
    assert compiled is on_compiled_path
    assert body == REFUSAL


class Recording:
    """A `Reader` over a plain connection that keeps every row it was sent."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.rows: list[Any] = []

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        rows: list[Any] = await self.conn.fetch(query, *args)
        self.rows += rows
        return rows


async def test_a_refused_read_leaves_the_content_in_the_database(small: Gateway) -> None:
    """The ordinary path's record reads learn the content's size from PostgreSQL and are
    sent none of it when a batch would pass what the response has left."""
    assert small.state is not None
    async with small.state["services"].pool.acquire() as conn, conn.transaction():
        # The reads' transaction, as a snapshot opens it: lane default readable.
        await conn.execute(settings_sql(Lanes.of(["default"]), login_role(conn)))
        ids = [row["id"] for row in await conn.fetch("SELECT id FROM records")]
        assert len(ids) == 6
        for read in (
            lambda db, budget: queries.records_by_id(db, ids, ["default"], budget=budget),
            lambda db, budget: queries.versions_of(db, ids, ["default"], budget=budget),
        ):
            db = Recording(conn)
            with pytest.raises(ResponseTooLargeError):
                await read(db, queries.ContentBudget(LIMIT))
            assert len(db.rows) == 6
            assert all(row.get("content", row.get("state")) is None for row in db.rows)
            fitting = Recording(conn)
            await read(fitting, queries.ContentBudget(6 * RECORD_BYTES))
            assert all(row.get("content", row.get("state")) for row in fitting.rows)
