"""Tags: an index over record content, listed with counts and found by `records(tag:)`;
never edge properties, never in the ledger, rebuilt from content by verify."""

from __future__ import annotations

import json
from typing import Any

from store.operations.verify import verify
from tests.conftest import GatewayFactory
from tests.gql._api import INGEST, UPDATE
from tests.gql._policy_support import mint
from tests.support import sql

POLICY = """
lanes:
  open: {}
  hidden: {}
agents:
  reader: { read: [open], write: [open] }
  curator: { read: ["*"], write: ["*"] }
"""
TAGS = "query($lane: String) { tags(lane: $lane) { tag recordCount } }"
TAGGED = """
query($tag: String, $lane: String, $first: Int, $after: String) {
  records(tag: $tag, lane: $lane, first: $first, after: $after) {
    totalCount items { id content properties } pageInfo { hasNextPage endCursor }
  }
}
"""


async def test_tags_follow_content_and_lanes(start_gateway: GatewayFactory) -> None:
    gateway = await start_gateway(policy_yaml=POLICY)
    tokens = await mint(gateway, "reader", "curator")

    async def as_(agent: str, query: str, **variables: Any) -> Any:
        return await gateway.data(query, variables, tokens[agent])

    async def write(agent: str, content: str, lane: str) -> str:
        made = await as_(agent, INGEST, input={"content": content, "lane": lane})
        record_id: str = made["ingest"]["id"]
        return record_id

    a = await write("reader", "Renewal for #Acme, see #renewal", "open")
    b = await write("reader", "Call #acme back", "open")
    await write("reader", "no tags here # heading", "open")
    h = await write("curator", "Secret #acme #secret", "hidden")

    def counted(rows: list[dict[str, Any]]) -> dict[str, int]:
        return {r["tag"]: r["recordCount"] for r in rows}

    assert counted((await as_("reader", TAGS))["tags"]) == {"acme": 2, "renewal": 1}
    # A lane the reader may not read counts nothing, as if it held nothing.
    assert (await as_("reader", TAGS, lane="hidden"))["tags"] == []
    assert counted((await as_("curator", TAGS))["tags"]) == {"acme": 3, "renewal": 1, "secret": 1}
    assert counted((await as_("curator", TAGS, lane="hidden"))["tags"]) == {"acme": 1, "secret": 1}

    page = (await as_("reader", TAGGED, tag="#ACME"))["records"]
    assert [r["id"] for r in page["items"]] == [a, b]
    assert page["totalCount"] == 2
    # A tag is no edge property.
    assert all(r["properties"] == [] for r in page["items"])
    first = (await as_("reader", TAGGED, tag="acme", first=1))["records"]
    assert [r["id"] for r in first["items"]] == [a] and first["totalCount"] == 2
    rest = await as_("reader", TAGGED, tag="acme", after=first["pageInfo"]["endCursor"])
    assert [r["id"] for r in rest["records"]["items"]] == [b]
    assert (await as_("reader", TAGGED, tag="secret"))["records"]["totalCount"] == 0
    found = (await as_("curator", TAGGED, tag="acme"))["records"]["items"]
    assert [r["id"] for r in found] == [a, b, h]
    assert (await as_("curator", "{ labels { label } }"))["labels"] == []

    # A new version's content moves its tags: gained, kept, lost.
    await as_("reader", UPDATE, id=a, content="Renewal moved to #q3 with #acme")
    await as_("reader", UPDATE, id=b, content="Called back")
    assert counted((await as_("reader", TAGS))["tags"]) == {"acme": 1, "q3": 1}
    assert [r["id"] for r in (await as_("reader", TAGGED, tag="q3"))["records"]["items"]] == [a]
    assert (await as_("reader", TAGGED, tag="renewal"))["records"]["items"] == []

    async with sql(gateway.database_url) as conn:
        # Not in the ledger: no entry holds a tag, only content.
        states = await conn.fetch("SELECT state FROM ledger WHERE kind = 'record'")
        assert {k for s in states for k in json.loads(s["state"])} == {
            "content",
            "lane",
            "source_type",
            "authority",
            "properties",
        }
    assert (await verify(gateway.database_url)).ok

    # The index is rebuilt from content by verify, which reports a difference.
    async with sql(gateway.database_url) as conn:
        await conn.execute("UPDATE record_tags SET tags = '{made-up}' WHERE record_id = $1", h)
        await conn.execute("DELETE FROM record_tags WHERE record_id = $1", a)
    report = await verify(gateway.database_url)
    assert f"{h}: tags [#made-up] indexed, its content has [#acme, #secret]" in report.problems
    assert f"{a}: tags none indexed, its content has [#acme, #q3]" in report.problems
    async with sql(gateway.database_url) as conn:
        await conn.execute("UPDATE record_tags SET tags = '{acme,secret}' WHERE record_id = $1", h)
        await conn.execute(
            "INSERT INTO record_tags (record_id, lane, tags) VALUES ($1, 'open', '{acme,q3}')", a
        )
    assert (await verify(gateway.database_url)).ok
