"""A timeline: properties ingested, updated, removed and added again, a record retired and
restored, each at a known instant; `record`, `gather`, `traverse`, `edgeProperty`,
`labels`, `edges` and `ego` asked as of every instant answer the state as it stood then."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.gql._api import ADD, REMOVE, RESTORE_RECORD, RETIRE_RECORD, UPDATE, ingest, unique
from tests.gql._edges import upsert
from tests.support import Gateway, assert_verified

AT = """
query($id: ID!, $from: ID!, $org: String!, $topic: String!, $asOf: DateTime) {
  record(id: $id, asOf: $asOf) { version properties content }
  org: gather(match: [$org], asOf: $asOf) { totalCount items { id version } }
  topic: gather(match: [$topic], mode: UNION, asOf: $asOf) { totalCount items { id } }
  timeline: gather(match: [$org], mode: TIMELINE, asOf: $asOf) { items { id } }
  traverse(from: $from, asOf: $asOf, edgeTypes: []) { items { record { id version } via } }
  edgeProperty(property: $org, asOf: $asOf) { memberCount }
  labels(asOf: $asOf) { label recordCount }
  edges(fromId: $id, asOf: $asOf) { totalCount items { id weight } }
  ego(nodes: [$from], asOf: $asOf) { edges { id weight } notShown { expiredExcluded } }
}
"""


def instant() -> str:
    return datetime.now(UTC).isoformat()


async def test_every_read_as_of_each_moment_answers_the_state_then(gateway: Gateway) -> None:
    tag = unique()
    org, one, two, label = f"org:{tag}", f"t{tag}:one", f"t{tag}:two", f"t{tag}"
    start = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    a = (await ingest(gateway, "a, first", [org, one]))["id"]
    b = (await ingest(gateway, "b", [org]))["id"]
    edge = (await upsert(gateway, fromId=a, toId=b, type="supports", weight=0.5))["id"]
    moments: list[tuple[str, str]] = [("ingested", instant())]
    await gateway.data(UPDATE, {"id": a, "content": "a, second", "properties": [two]})
    await upsert(gateway, fromId=a, toId=b, type="supports", weight=0.75)
    moments.append(("updated", instant()))
    await gateway.data(REMOVE, {"id": a, "labels": ["org"]})
    moments.append(("removed", instant()))
    await gateway.data(ADD, {"id": a, "properties": [org]})
    moments.append(("re-added", instant()))
    await gateway.data(RETIRE_RECORD, {"id": a, "reason": "superseded"})
    moments.append(("retired", instant()))
    await gateway.data(RESTORE_RECORD, {"id": a})
    moments.append(("restored", instant()))

    # What each moment held: a's version, properties and content; whether a carried org
    # and which topic it carried (b carries org throughout).
    expected: dict[str, tuple[int, list[str], str, bool, str | None]] = {
        "ingested": (1, [org, one], "a, first", True, one),
        "updated": (2, [org, two], "a, second", True, two),
        "removed": (3, [two], "a, second", False, two),
        "re-added": (4, [two, org], "a, second", True, two),
        "restored": (6, [two, org], "a, second", True, two),
    }
    for name, at in moments:
        variables = {"id": a, "from": b, "org": org, "topic": one, "asOf": at}
        body = await gateway.post(AT, variables)
        data: dict[str, Any] = body["data"]
        if name == "retired":
            # Retired then: record(asOf) says so; every other read leaves it out.
            [error] = body["errors"]
            assert error["path"] == ["record"] and error["extensions"]["code"] == "NOT_FOUND"
            assert error["extensions"]["retired"]["reason"] == "superseded"
            assert data["record"] is None
            assert [r["id"] for r in data["org"]["items"]] == [b]
            assert data["traverse"]["items"] == []
            assert data["edgeProperty"]["memberCount"] == 1
            assert data["topic"]["totalCount"] == 0
            assert label not in {c["label"] for c in data["labels"]}
            # Its typed edge was retired with it, and is gone with it, expired or not.
            assert data["edges"]["totalCount"] == 0
            assert data["ego"] == {"edges": [], "notShown": {"expiredExcluded": 0}}
            continue
        assert "errors" not in body, (name, body)
        version, properties, content, on_org, topic = expected[name]
        assert data["record"] == {"version": version, "properties": properties, "content": content}
        members = {r["id"]: r["version"] for r in data["org"]["items"]}
        assert members == ({a: version, b: 1} if on_org else {b: 1}), name
        assert data["edgeProperty"]["memberCount"] == (2 if on_org else 1), name
        # The timeline orders by when each joined: b first once a re-joined.
        order = [r["id"] for r in data["timeline"]["items"]]
        assert order == ([a, b] if name in ("ingested", "updated") else [b, a] if on_org else [b])
        # One's topic was held only until the update.
        assert [r["id"] for r in data["topic"]["items"]] == ([a] if topic == one else []), name
        reached = [
            (s["record"]["id"], s["record"]["version"], s["via"]) for s in data["traverse"]["items"]
        ]
        assert reached == ([(a, version, org)] if on_org else []), name
        counts = {c["label"]: c["recordCount"] for c in data["labels"]}
        assert counts[label] == 1, name
        # The typed edge: its weight of then; retired with the record, it stays retired.
        if name == "restored":
            assert data["edges"]["totalCount"] == 0
            assert data["ego"] == {"edges": [], "notShown": {"expiredExcluded": 1}}
        else:
            weight = 0.5 if name == "ingested" else 0.75
            assert data["edges"]["items"] == [{"id": edge, "weight": weight}], name
            assert data["ego"]["edges"] == [{"id": edge, "weight": weight}], name

    # Before anything was written: nothing.
    body = await gateway.post(AT, {"id": a, "from": b, "org": org, "topic": one, "asOf": start})
    assert body["data"]["record"] is None and body["data"]["org"]["totalCount"] == 0
    assert body["data"]["edgeProperty"] is None
    await assert_verified(gateway.database_url)
