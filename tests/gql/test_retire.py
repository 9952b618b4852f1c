"""Forgetting a record end to end: retireRecord and restoreRecord, through the guard and
the ledger, and every read leaving a retired record out now and showing it before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import GatewayFactory
from tests.gql._api import AUDIT, GATHER, RECORD, RESTORE_RECORD, RETIRE_RECORD, UPDATE, unique
from tests.gql._asserted import CONNECT, DISCONNECT, GROUP, UNGROUP
from tests.gql._differential import compiled_path
from tests.gql._edges import CONFLICTS, RELATED, RETIRE, UPSERT, edges, ego, upsert
from tests.gql._feed import feed_client
from tests.gql._mcp import call, over_http
from tests.gql._policy_support import ADD, mint, without_id
from tests.support import Gateway, assert_verified

POLICY = """
lanes:
  notes: {}
  crm: {}
agents:
  writer: { read: [notes], write: [notes] }
  onlooker: { read: [notes], write: [crm] }
  outsider: { read: [crm], write: [crm] }
"""

READS = """
query($id: ID!, $match: [String!]!, $property: String!, $asOf: DateTime) {
  records(first: 500) { totalCount items { id } }
  gather(match: $match, asOf: $asOf) { totalCount items { id content } }
  union: gather(match: $match, mode: UNION, asOf: $asOf) { totalCount items { id } }
  timeline: gather(match: $match, mode: TIMELINE, asOf: $asOf) { totalCount items { id } }
  edgeProperty(property: $property, asOf: $asOf) {
    memberCount members(first: 50) { totalCount items { id } } }
  labels(asOf: $asOf) { label recordCount }
  one: record(id: $id) { id groups { records { id } members(first: 5) { totalCount } } }
  traverse(from: $id, asOf: $asOf) { items { record { id } } notShown }
}
"""


@pytest.fixture(scope="module")
async def env(start_gateway: GatewayFactory) -> tuple[Gateway, dict[str, str]]:
    gateway = await start_gateway(policy_yaml=POLICY)
    return gateway, await mint(gateway, "writer", "onlooker", "outsider")


async def write(gateway: Gateway, token: str, content: str, props: list[str]) -> str:
    query = "mutation($input: IngestInput!) { ingest(input: $input) { id } }"
    fields = {"content": content, "lane": "notes", "properties": props}
    data = await gateway.data(query, {"input": fields}, token)
    return str(data["ingest"]["id"])


def now() -> str:
    return datetime.now(UTC).isoformat()


async def test_a_retired_record_is_absent_now_present_before_and_restored(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    writer = tokens["writer"]
    org, label = f"org:{unique()}", unique("l")
    kept = await write(gateway, writer, "kept", [org, f"{label}:a"])
    gone = await write(gateway, writer, "to forget", [org, f"{label}:a", "person:Sam"])
    group = 'mutation($ids: [ID!]!) { group(recordIds: $ids, hint: "pair") { id } }'
    third = await write(gateway, writer, "third", [f"{label}:b"])
    await gateway.data(group, {"ids": [kept, gone, third]}, writer)
    before = now()
    variables = {"id": kept, "match": [org], "property": org, "asOf": None}
    seen = await gateway.data(READS, variables, writer)
    at_before = await gateway.data(READS, variables | {"asOf": before}, writer)
    assert seen["gather"]["totalCount"] == 2 and seen["edgeProperty"]["memberCount"] == 2
    counts = {c["label"]: c["recordCount"] for c in seen["labels"]}
    assert counts[label] == 3

    retired = (await gateway.data(RETIRE_RECORD, {"id": gone[:12], "reason": "wrong"}, writer))[
        "retireRecord"
    ]
    assert retired["id"] == gone and retired["version"] == 3
    assert retired["retired"]["actor"] == "writer" and retired["retired"]["reason"] == "wrong"
    assert retired["content"] == "to forget"
    while_retired = now()

    # Every current read leaves it out, as if it had never been written.
    after = await gateway.data(READS, variables, writer)
    assert {r["id"] for r in after["records"]["items"]} == {kept, third}
    assert after["records"]["totalCount"] == 2
    for name in ("gather", "union", "timeline"):
        assert [r["id"] for r in after[name]["items"]] == [kept], name
        assert after[name]["totalCount"] == 1
    assert after["edgeProperty"]["memberCount"] == 1
    assert after["edgeProperty"]["members"]["totalCount"] == 1
    assert {c["label"]: c["recordCount"] for c in after["labels"]}[label] == 2
    [on] = after["one"]["groups"]
    assert {r["id"] for r in on["records"]} == {kept, third}
    assert on["members"]["totalCount"] == 2
    assert gone not in str(after["traverse"])
    # ... and every read before the retirement shows it as it was.
    then = await gateway.data(READS, variables | {"asOf": before}, writer)
    timed = ("gather", "union", "timeline", "edgeProperty", "labels", "traverse")
    assert {k: then[k] for k in timed} == {k: at_before[k] for k in timed}
    assert (await gateway.data(RECORD, {"id": gone, "asOf": before}, writer))["record"][
        "content"
    ] == "to forget"

    # record(id) says it is retired, when, by whom and why; a prefix resolves to nothing.
    error = await gateway.error(RECORD, {"id": gone}, writer)
    assert error["extensions"]["code"] == "NOT_FOUND"
    assert error["extensions"]["retired"] == retired["retired"]
    assert "retired at" in error["message"] and "restoreRecord" in error["message"]
    assert "wrong" in error["message"]
    assert (await gateway.data(RECORD, {"id": gone[:10]}, writer))["record"] is None
    traverse = "query($id: ID!) { traverse(from: $id) { notShown } }"
    assert (await gateway.error(traverse, {"id": gone}, writer))["extensions"]["retired"]

    # Nothing writes it but restoring; retiring it again changes nothing and says so.
    refused = await gateway.error(UPDATE, {"id": gone, "content": "x"}, writer)
    assert refused["extensions"]["code"] == "NOT_FOUND" and "retired" in refused["message"]
    refused = await gateway.error(ADD, {"id": gone, "properties": ["x:y"]}, writer)
    assert refused["extensions"]["code"] == "NOT_FOUND"
    again = await gateway.error(RETIRE_RECORD, {"id": gone, "reason": "twice"}, writer)
    assert again["extensions"]["code"] == "CONFLICT" and "nothing changed" in again["message"]
    assert again["extensions"]["retired"] == retired["retired"]

    restored = (await gateway.data(RESTORE_RECORD, {"id": gone[:12]}, writer))["restoreRecord"]
    assert restored["version"] == 4 and restored["retired"] is None
    assert restored["content"] == "to forget" and org in restored["properties"]
    back = await gateway.data(READS, variables, writer)
    assert {r["id"] for r in back["gather"]["items"]} == {kept, gone}
    assert back["edgeProperty"]["memberCount"] == 2
    assert {c["label"]: c["recordCount"] for c in back["labels"]}[label] == 3
    assert {r["id"] for r in back["one"]["groups"][0]["records"]} == {kept, gone, third}
    again = await gateway.error(RESTORE_RECORD, {"id": gone}, writer)
    assert again["extensions"]["code"] == "CONFLICT" and "not retired" in again["message"]
    # Restored now, it was retired then: a read as of then still leaves it out.
    was = await gateway.error(RECORD, {"id": gone, "asOf": while_retired}, writer)
    assert was["extensions"]["code"] == "NOT_FOUND", was
    assert was["extensions"]["retired"] == retired["retired"]
    groups = (
        "query($id: ID!, $at: DateTime) { record(id: $id, asOf: $at) "
        "{ groups { records { id } } } }"
    )
    [then] = (await gateway.data(groups, {"id": kept, "at": while_retired}, writer))["record"][
        "groups"
    ]
    assert {r["id"] for r in then["records"]} == {kept, third}

    events = await gateway.data(AUDIT, {"recordId": gone}, writer)
    kinds = [(e["kind"], e["payload"]) for e in events["audit"]["items"]]
    assert kinds[-2:] == [("sr_retired", {"reason": "wrong"}), ("sr_restored", {"ended": []})]
    await assert_verified(gateway.database_url)


async def test_only_writers_of_its_lane_retire_and_the_unreadable_is_not_found(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    record = await write(gateway, tokens["writer"], "guarded", [f"org:{unique()}"])
    forbidden = await gateway.error(RETIRE_RECORD, {"id": record}, tokens["onlooker"])
    assert forbidden["extensions"]["code"] == "FORBIDDEN"
    assert "notes" in forbidden["message"]
    nowhere = "sr_" + "0" * 32
    for mutation in (RETIRE_RECORD, RESTORE_RECORD):
        hidden = await gateway.error(mutation, {"id": record}, tokens["outsider"])
        missing = await gateway.error(mutation, {"id": nowhere}, tokens["outsider"])
        assert hidden["extensions"]["code"] == "NOT_FOUND"
        assert without_id(hidden, record) == without_id(missing, nowhere)
    await gateway.data(RETIRE_RECORD, {"id": record}, tokens["writer"])
    # Retired, it is still not found by those who cannot read its lane, and not told so.
    unseen = await gateway.post(RECORD, {"id": record}, tokens["outsider"])
    assert unseen == {"data": {"record": None}}
    forbidden = await gateway.error(RESTORE_RECORD, {"id": record}, tokens["onlooker"])
    assert forbidden["extensions"]["code"] == "FORBIDDEN"


async def test_the_feed_carries_retire_and_restore_to_its_readers_only(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    record = await write(gateway, tokens["writer"], "watched", [f"org:{unique()}"])
    kinds = ["sr_retired", "sr_restored"]
    async with (
        feed_client(gateway, tokens["onlooker"]) as reader,
        feed_client(gateway, tokens["outsider"]) as outsider,
    ):
        await reader.subscribe("r", kinds=kinds)
        await outsider.subscribe("o", kinds=kinds)
        await reader.nothing("r", 0.3)
        await gateway.data(RETIRE_RECORD, {"id": record, "reason": "stale"}, tokens["writer"])
        await gateway.data(RESTORE_RECORD, {"id": record}, tokens["writer"])
        got: list[dict[str, Any]] = await reader.events("r", 2)
        assert [(e["kind"], e["recordId"], e["payload"]) for e in got] == [
            ("sr_retired", record, {"reason": "stale"}),
            ("sr_restored", record, {"ended": []}),
        ]
        assert all(e["actor"] == "writer" and e["lane"] == "notes" for e in got)
        await outsider.nothing("o", 1.0)


async def test_gather_and_records_pages_count_only_the_live(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    org = f"org:{unique()}"
    ids = [await write(gateway, tokens["writer"], f"r{n}", [org]) for n in range(5)]
    for record in ids[1::2]:
        await gateway.data(RETIRE_RECORD, {"id": record}, tokens["writer"])
    page = await gateway.data(GATHER, {"match": [org], "first": 2}, tokens["writer"])
    assert page["gather"]["totalCount"] == 3
    seen = [r["id"] for r in page["gather"]["items"]]
    cursor = page["gather"]["pageInfo"]["endCursor"]
    rest = await gateway.data(
        GATHER, {"match": [org], "first": 2, "after": cursor}, tokens["writer"]
    )
    seen += [r["id"] for r in rest["gather"]["items"]]
    assert sorted(seen) == sorted(ids[0::2])


ASSERTED = """
query($id: ID!) { record(id: $id) { version connections { id records { id } }
  groups { id records { id } } } }
"""


async def test_restored_it_rejoins_the_asserted_edges_that_still_hold_only(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    writer = tokens["writer"]
    a, b, c, d = [await write(gateway, writer, name, []) for name in "abcd"]
    link = (await gateway.data(CONNECT, {"a": a, "b": b, "hint": "pair"}, writer))["connect"]
    team = (await gateway.data(GROUP, {"ids": [a, b, c, d], "hint": "team"}, writer))["group"]
    await gateway.data(RETIRE_RECORD, {"id": a}, writer)
    # While it is retired the connection ends at its other record, and the group goes on.
    await gateway.data(DISCONNECT, {"id": link["id"]}, writer)
    await gateway.data(UNGROUP, {"id": team["id"], "ids": [b]}, writer)
    restored = (await gateway.data(RESTORE_RECORD, {"id": a}, writer))["restoreRecord"]
    assert link["id"] not in str(restored["properties"])
    seen = (await gateway.data(ASSERTED, {"id": a}, writer))["record"]
    assert seen["connections"] == []
    [group] = seen["groups"]
    assert group["id"] == team["id"] and {r["id"] for r in group["records"]} == {a, c, d}
    events = await gateway.data(AUDIT, {"recordId": a, "kinds": ["sr_restored"]}, writer)
    [event] = events["audit"]["items"]
    assert event["payload"] == {"ended": [link["id"]]}
    await assert_verified(gateway.database_url)


async def test_retiring_a_record_retires_its_typed_edges_and_restoring_leaves_them(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    writer = tokens["writer"]
    a, b, c = [await write(gateway, writer, name, []) for name in ("ea", "eb", "ec")]
    out = await upsert(gateway, writer, fromId=a, toId=b, type="supports", weight=0.8)
    into = await upsert(gateway, writer, fromId=c, toId=a, type="contradicts")
    kept = await upsert(gateway, writer, fromId=b, toId=c, type="supports")
    before = now()
    await gateway.data(RETIRE_RECORD, {"id": a, "reason": "wrong"}, writer)

    # Both of its edges are retired in the same transaction; b to c holds.
    for edge in (out, into):
        events = await gateway.data(AUDIT, {"kinds": ["edge_retired"], "first": 500}, writer)
        [retired] = [
            e for e in events["audit"]["items"] if e["payload"].get("edgeId") == edge["id"]
        ]
        assert retired["actor"] == "writer"
    for expired in (False, True):
        seen = await edges(gateway, writer, includeExpired=expired, first=500)
        ids = {e["id"] for e in seen["items"]}
        # Gone, the expired ones shown too: as if a had never been written.
        assert out["id"] not in ids and into["id"] not in ids and kept["id"] in ids
    related = (await gateway.data(RELATED, {"id": b}, writer))["related"]
    assert [e["id"] for e in related["outgoing"]["items"]] == [kept["id"]]
    assert related["incoming"]["items"] == [] and related["incoming"]["totalCount"] == 0
    view = await ego(gateway, writer, nodes=[b, c], hops=2)
    assert {e["id"] for e in view["edges"]} == {kept["id"]}
    assert view["notShown"]["expiredExcluded"] == 0
    # Before the retirement: as they were.
    then = await edges(gateway, writer, asOf=before, first=500)
    assert {out["id"], into["id"], kept["id"]} <= {e["id"] for e in then["items"]}
    old = await ego(gateway, writer, nodes=[b], hops=1, asOf=before)
    assert out["id"] in {e["id"] for e in old["edges"]}

    # No edge is written to or from a retired record.
    refused = await gateway.error(UPSERT, {"input": {"fromId": b, "toId": a, "type": "x"}}, writer)
    assert refused["extensions"]["code"] == "NOT_FOUND" and "retired" in refused["message"]

    # Restored, it is back; its edges stay retired (expired, shown as such).
    await gateway.data(RESTORE_RECORD, {"id": a}, writer)
    assert (await edges(gateway, writer, fromId=a))["items"] == []
    expired = await edges(gateway, writer, fromId=a, includeExpired=True)
    [edge] = expired["items"]
    assert edge["id"] == out["id"] and edge["expiredAt"] is not None
    again = await upsert(gateway, writer, fromId=a, toId=b, type="supports")
    assert again["id"] != out["id"]
    await assert_verified(gateway.database_url)


@contextmanager
def ordinary_path(gateway: Gateway) -> Iterator[None]:
    """Every request of the block answered by strawberry, none by the compiled path."""
    view = gateway.app.view
    compiled, view.compiled = view.compiled, None
    try:
        yield
    finally:
        view.compiled = compiled


async def test_an_edge_retired_for_later_is_gone_once_a_record_it_joins_is_retired(
    env: tuple[Gateway, dict[str, str]],
) -> None:
    gateway, tokens = env
    writer = tokens["writer"]
    a, b = [await write(gateway, writer, name, []) for name in ("a3", "a4")]
    namespace = unique("ns")
    edge = await upsert(gateway, writer, fromId=a, toId=b, type="contradicts", namespace=namespace)
    # Retired to stop holding tomorrow: it holds until then.
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    await gateway.data(RETIRE, {"id": edge["id"], "invalidAt": tomorrow}, writer)
    before = now()
    await gateway.data(RETIRE_RECORD, {"id": b, "reason": "forgotten"}, writer)
    after = now()

    async def listed() -> list[list[str]]:
        pages = [
            await edges(gateway, writer, namespace=namespace, includeExpired=expired, asOf=at)
            for expired in (False, True)
            for at in (None, after)
        ]
        pages.append(await edges(gateway, writer, fromId=a))
        pages.append(await edges(gateway, writer, fromId=a[:12], includeExpired=True))
        found = [[e["id"] for e in page["items"]] for page in pages]
        assert [page["totalCount"] for page in pages] == [len(f) for f in found]
        around = (await gateway.data(RELATED, {"id": a}, writer))["related"]
        for side in ("outgoing", "incoming"):
            assert around[side]["totalCount"] == len(around[side]["items"])
        ends = around["outgoing"]["items"] + around["incoming"]["items"]
        found.append([e["id"] for e in ends])
        queue = await gateway.data(CONFLICTS, {"status": "ALL", "first": 500}, writer)
        found.append([e["id"] for e in queue["conflicts"]["items"] if e["id"] == edge["id"]])
        for expired in (False, True):
            view = await ego(gateway, writer, nodes=[a], includeExpired=expired)
            found.append([e["id"] for e in view["edges"]])
        return found

    answered = compiled_path(gateway).answered
    assert await listed() == [[]] * 10
    assert compiled_path(gateway).answered > answered
    with ordinary_path(gateway):
        assert await listed() == [[]] * 10
    async with over_http(gateway, writer) as session:
        assert (await call(session, "edge_list", namespace=namespace))["items"] == []
        around = await call(session, "related", id=a)
        assert around["outgoing"]["items"] == around["incoming"]["items"] == []
        queue = await call(session, "conflicts", status="all", first=100)
        assert edge["id"] not in {e["id"] for e in queue["items"]}
    # Before its record was retired it held, as it was then; restored, it holds again
    # until its own invalidAt (retiring the record wrote nothing to it).
    then = await edges(gateway, writer, namespace=namespace, asOf=before)
    assert [e["id"] for e in then["items"]] == [edge["id"]]
    await gateway.data(RESTORE_RECORD, {"id": b}, writer)
    back = await edges(gateway, writer, namespace=namespace)
    assert [e["id"] for e in back["items"]] == [edge["id"]]
    assert (await edges(gateway, writer, namespace=namespace, asOf=after))["items"] == []
