"""Gather, labels and hyperedges end to end: set operations, paging, points in time."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from tests.conftest import GatewayFactory
from tests.gql._api import ADD, GATHER, INGEST_MANY, REMOVE, UPDATE, gather_ids, ingest, unique
from tests.support import Databases, Gateway, plain

EDGE = """
query($property: String!, $asOf: DateTime, $first: Int, $after: String) {
  edgeProperty(property: $property, asOf: $asOf) {
    id property label value memberCount
    members(first: $first, after: $after) {
      totalCount items { id content } pageInfo { hasNextPage endCursor }
    }
  }
}
"""
LABELS = "query($lane: String) { labels(lane: $lane) { label recordCount } }"


async def label_counts(gateway: Gateway, lane: str | None = None) -> dict[str, int]:
    data = await gateway.data(LABELS, {"lane": lane})
    return {row["label"]: row["recordCount"] for row in data["labels"]}


async def all_pages(gateway: Gateway, variables: dict[str, Any], size: int) -> list[str]:
    """Every id of a gather, page by page, checking each page's shape."""
    ids: list[str] = []
    after = None
    totals = set()
    while True:
        page = (await gateway.data(GATHER, {**variables, "first": size, "after": after}))["gather"]
        totals.add(page["totalCount"])
        ids.extend(item["id"] for item in page["items"])
        if not page["pageInfo"]["hasNextPage"]:
            assert len(page["items"]) <= size
            break
        assert len(page["items"]) == size
        assert page["pageInfo"]["endCursor"]
        after = page["pageInfo"]["endCursor"]
    assert totals == {len(ids)}
    return ids


async def test_intersect_union_and_timeline(gateway: Gateway) -> None:
    org, topic = f"org:{unique('Acme-')}", f"topic:{unique('renewal-')}"
    written = [
        await ingest(gateway, "both 1", [org, topic]),
        await ingest(gateway, "org only", [org]),
        await ingest(gateway, "topic only", [topic]),
        await ingest(gateway, "both 2", [topic, org]),
        await ingest(gateway, "neither", ["topic:else"]),
        await ingest(gateway, "both 3", [org, "x:y", topic]),
    ]
    ids = [r["id"] for r in written]

    both = await gather_ids(gateway, [org, topic])
    assert both == sorted([ids[0], ids[3], ids[5]])
    assert await gather_ids(gateway, [org, topic], "INTERSECT") == both
    # A property named twice is one set.
    assert await gather_ids(gateway, [org, org, topic]) == both

    union = await gather_ids(gateway, [org, topic], "UNION")
    assert union == sorted(ids[:4] + [ids[5]])

    timeline = (await gateway.data(GATHER, {"match": [org, topic], "mode": "TIMELINE"}))["gather"]
    assert [item["id"] for item in timeline["items"]] == ids[:4] + [ids[5]]
    assert timeline["totalCount"] == 5
    times = [datetime.fromisoformat(item["createdAt"]) for item in timeline["items"]]
    assert times == sorted(times)

    # Absent values make an empty intersection and do not widen a union.
    assert await gather_ids(gateway, [org, f"topic:{unique()}"]) == []
    assert await gather_ids(gateway, [org, f"topic:{unique()}"], "UNION") == sorted(
        [ids[0], ids[1], ids[3], ids[5]]
    )


async def test_gather_matches_values_exactly(gateway: Gateway) -> None:
    value = unique("Acme-")
    record = await ingest(gateway, "exact", [f"org:{value}"])
    assert await gather_ids(gateway, [f"org:{value}"]) == [record["id"]]
    # The match string is parsed like a written one (trimmed label and value).
    assert await gather_ids(gateway, [f" org : {value} "]) == [record["id"]]
    assert await gather_ids(gateway, [f"org:{value.lower()}"]) == []
    assert await gather_ids(gateway, [f"company:{value}"]) == []
    assert await gather_ids(gateway, [f"org:{value}"], lanes=["default"]) == [record["id"]]
    assert await gather_ids(gateway, [f"org:{value}"], lanes=["elsewhere"]) == []


async def test_gather_pages_through_every_mode(gateway: Gateway) -> None:
    tag = f"batch:{unique()}"
    data = await gateway.data(
        INGEST_MANY, {"inputs": [{"content": f"n{n}", "properties": [tag]} for n in range(7)]}
    )
    expected = sorted(r["id"] for r in data["ingestMany"])
    for mode in ("INTERSECT", "UNION", "TIMELINE"):
        ids = await all_pages(gateway, {"match": [tag], "mode": mode}, size=3)
        assert sorted(ids) == expected, mode
        assert len(set(ids)) == len(ids), mode
    # Records written in one call share a time; the timeline breaks the tie by id.
    assert await all_pages(gateway, {"match": [tag], "mode": "TIMELINE"}, size=2) == expected


async def test_timeline_pages_across_write_times(gateway: Gateway) -> None:
    tag = f"t:{unique()}"
    ids = [(await ingest(gateway, f"n{n}", [tag]))["id"] for n in range(5)]
    assert await all_pages(gateway, {"match": [tag], "mode": "TIMELINE"}, size=2) == ids


async def test_page_size_is_capped(gateway: Gateway) -> None:
    for first in (501, 0, -1):
        error = await gateway.error(GATHER, {"match": ["org:x"], "first": first})
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert error["message"] == f"first must be between 1 and 500 (got {first})"
        assert error["extensions"]["allowed"] == [1, 500]
    tag = f"cap:{unique()}"
    await gateway.data(INGEST_MANY, {"inputs": [{"content": "a", "properties": [tag]}] * 501})
    page = (await gateway.data(GATHER, {"match": [tag], "first": 500}))["gather"]
    assert (len(page["items"]), page["totalCount"], page["pageInfo"]["hasNextPage"]) == (
        500,
        501,
        True,
    )
    for query in (
        "{ records(first: 501) { totalCount } }",
        "{ audit(first: 501) { totalCount } }",
    ):
        error = await gateway.error(query)
        assert "between 1 and 500" in error["message"], query


async def test_a_cursor_from_another_list_is_refused(gateway: Gateway) -> None:
    tag = f"c:{unique()}"
    await gateway.data(INGEST_MANY, {"inputs": [{"content": "a", "properties": [tag]}] * 3})
    timeline = (await gateway.data(GATHER, {"match": [tag], "mode": "TIMELINE", "first": 1}))[
        "gather"
    ]
    cursor = timeline["pageInfo"]["endCursor"]
    for after in (cursor, "not-a-cursor", "W10"):
        error = await gateway.error(GATHER, {"match": [tag], "mode": "UNION", "after": after})
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert "cursor" in error["message"]


async def test_gather_needs_between_one_and_sixteen_properties(gateway: Gateway) -> None:
    error = await gateway.error(GATHER, {"match": []})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "at least one" in error["message"]
    error = await gateway.error(GATHER, {"match": [f"n:{n}" for n in range(17)]})
    assert "at most 16" in error["message"]


async def test_labels_count_records_per_label(gateway: Gateway) -> None:
    label = unique("lbl_")
    other = unique("lbl_")
    # Starts like a reserved label but is not one: "e" then a letter, not "e_".
    lookalike = unique("ex")
    first = await ingest(
        gateway, "a", [f"{label}:one", f"{label}:two", f"{other}:x", f"{lookalike}:y"]
    )
    await ingest(gateway, "b", [f"{label}:one"])
    await ingest(gateway, "c", [f"{label}:three"])

    counts = await label_counts(gateway)
    assert counts[label] == 3  # records, not values
    assert counts[other] == 1
    assert counts[lookalike] == 1
    assert not any(name.startswith("e_") for name in counts)
    assert (await label_counts(gateway, "default"))[label] == 3
    assert await label_counts(gateway, "no_such_lane") == {}

    # Ordered by count, most used first.
    data = await gateway.data(LABELS, {"lane": None})
    numbers = [row["recordCount"] for row in data["labels"]]
    assert numbers == sorted(numbers, reverse=True)

    await gateway.data(REMOVE, {"id": first["id"], "labels": [other]})
    counts = await label_counts(gateway)
    assert other not in counts
    assert counts[label] == 3


async def test_edge_property_is_the_hyperedge_with_its_members(gateway: Gateway) -> None:
    prop = f"org:{unique('Acme-')}"
    data = await gateway.data(
        INGEST_MANY, {"inputs": [{"content": f"m{n}", "properties": [prop]} for n in range(5)]}
    )
    expected = sorted(r["id"] for r in data["ingestMany"])

    edge = (await gateway.data(EDGE, {"property": prop, "first": 2}))["edgeProperty"]
    assert edge["id"] is None
    assert edge["property"] == prop
    assert edge["label"] == "org"
    assert edge["value"] == prop.removeprefix("org:")
    assert edge["memberCount"] == 5
    members = edge["members"]
    assert members["totalCount"] == 5
    assert len(members["items"]) == 2
    assert members["pageInfo"]["hasNextPage"] is True

    seen = [item["id"] for item in members["items"]]
    after = members["pageInfo"]["endCursor"]
    while after is not None:
        page = (await gateway.data(EDGE, {"property": prop, "first": 2, "after": after}))[
            "edgeProperty"
        ]["members"]
        seen.extend(item["id"] for item in page["items"])
        after = page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
    assert seen == expected

    error = await gateway.error(EDGE, {"property": prop, "first": 501})
    assert "between 1 and 500" in error["message"]

    assert (await gateway.data(EDGE, {"property": f"org:{unique()}"}))["edgeProperty"] is None


async def test_record_edge_properties_count_their_members(gateway: Gateway) -> None:
    prop = f"org:{unique('Acme-')}"
    first = await ingest(gateway, "one", [prop, "solo:" + unique()])
    await ingest(gateway, "two", [prop])
    data = await gateway.data(
        """query($id: ID!) { record(id: $id) {
             edgeProperties { property memberCount members { totalCount items { id } } } } }""",
        {"id": first["id"]},
    )
    edges = {ep["property"]: ep for ep in data["record"]["edgeProperties"]}
    assert edges[prop]["memberCount"] == 2
    assert edges[prop]["members"]["totalCount"] == 2
    solo = next(ep for name, ep in edges.items() if name.startswith("solo:"))
    assert solo["memberCount"] == 1
    assert [item["id"] for item in solo["members"]["items"]] == [first["id"]]


async def test_gather_as_of_sees_the_membership_of_that_time(gateway: Gateway) -> None:
    prop = f"org:{unique('Acme-')}"
    stays = await ingest(gateway, "stays", [prop])
    leaves = await ingest(gateway, "leaves v1", [prop, "topic:x"])
    before_change = leaves["updatedAt"]

    updated = (await gateway.data(UPDATE, {"id": leaves["id"], "content": "leaves v2"}))["update"]
    removed = (await gateway.data(REMOVE, {"id": leaves["id"], "properties": [prop]}))[
        "removeProperties"
    ]
    after_removal = removed["record"]["updatedAt"]
    assert after_removal > updated["updatedAt"] > before_change

    assert await gather_ids(gateway, [prop]) == [stays["id"]]
    then = (await gateway.data(GATHER, {"match": [prop], "asOf": before_change}))["gather"]
    assert sorted(item["id"] for item in then["items"]) == sorted([stays["id"], leaves["id"]])
    assert then["totalCount"] == 2
    # The records come as they were then, too.
    old = next(item for item in then["items"] if item["id"] == leaves["id"])
    assert old["content"] == "leaves v1"
    assert old["properties"] == [prop, "topic:x"]
    # Between the update and the removal it was still a member, with the new content.
    mid = (await gateway.data(GATHER, {"match": [prop], "asOf": updated["updatedAt"]}))["gather"]
    assert {item["id"]: item["content"] for item in mid["items"]}[leaves["id"]] == "leaves v2"
    assert await gather_ids(gateway, [prop], asOf=after_removal) == [stays["id"]]

    edge_then = (await gateway.data(EDGE, {"property": prop, "asOf": before_change}))[
        "edgeProperty"
    ]
    assert edge_then["memberCount"] == 2
    assert edge_then["members"]["totalCount"] == 2
    edge_now = (await gateway.data(EDGE, {"property": prop}))["edgeProperty"]
    assert edge_now["memberCount"] == 1

    # Before any of them was written the edge did not exist.
    first_write = datetime.fromisoformat(stays["createdAt"])
    earlier = first_write.replace(year=first_write.year - 1).isoformat()
    assert await gather_ids(gateway, [prop], asOf=earlier) == []
    assert (await gateway.data(EDGE, {"property": prop, "asOf": earlier}))["edgeProperty"] is None


async def test_leaving_and_rejoining_an_edge(gateway: Gateway) -> None:
    prop = f"topic:{unique()}"
    record = await ingest(gateway, "x", [prop])
    joined = record["updatedAt"]
    left = (await gateway.data(REMOVE, {"id": record["id"], "properties": [prop]}))[
        "removeProperties"
    ]["record"]["updatedAt"]
    back = (await gateway.data(ADD, {"id": record["id"], "properties": [prop]}))["addProperties"][
        "record"
    ]["updatedAt"]

    assert await gather_ids(gateway, [prop], asOf=joined) == [record["id"]]
    assert await gather_ids(gateway, [prop], asOf=left) == []
    assert await gather_ids(gateway, [prop], asOf=back) == [record["id"]]
    assert await gather_ids(gateway, [prop]) == [record["id"]]
    assert await gather_ids(gateway, [prop, prop], "UNION") == [record["id"]]


async def test_a_server_time_zone_far_from_utc_changes_nothing(
    databases: Databases, start_gateway: GatewayFactory
) -> None:
    url = await databases.create()
    name = urlsplit(plain(url)).path.lstrip("/")
    admin = await asyncpg.connect(plain(databases.url))
    try:
        await admin.execute(f"ALTER DATABASE \"{name}\" SET timezone TO 'Pacific/Kiritimati'")
    finally:
        await admin.close()
    gateway = await start_gateway(anonymous_agent="dev", database_url=url)  # verified at teardown

    tag = f"tz:{unique()}"
    ids = [(await ingest(gateway, f"n{n}", [tag]))["id"] for n in range(4)]
    created = [await read_created(gateway, rid) for rid in ids]
    assert all(at.endswith("+00:00") for at in created), created
    assert await all_pages(gateway, {"match": [tag], "mode": "TIMELINE"}, size=3) == ids
    removed = (await gateway.data(REMOVE, {"id": ids[0], "properties": [tag]}))["removeProperties"][
        "record"
    ]
    assert await gather_ids(gateway, [tag], asOf=removed["createdAt"]) == sorted([ids[0]])
    assert ids[0] not in await gather_ids(gateway, [tag])


async def read_created(gateway: Gateway, record_id: str) -> str:
    data = await gateway.data(
        "query($id: ID!) { record(id: $id) { createdAt } }", {"id": record_id}
    )
    created: str = data["record"]["createdAt"]
    return created


async def test_labels_of_a_lane_nobody_declares_is_empty_not_everything(gateway: Gateway) -> None:
    await gateway.data(
        'mutation { ingest(input: {content: "x", properties: ["org:EmptyLane"]}) { id } }'
    )
    everything = await gateway.data(LABELS, {"lane": None})
    assert any(row["label"] == "org" for row in everything["labels"])
    assert (await gateway.data(LABELS, {"lane": ""}))["labels"] == []
    assert (await gateway.data(LABELS, {"lane": "nowhere"}))["labels"] == []
