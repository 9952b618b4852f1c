"""Records end to end: ingest, ingestMany, update, versions, point-in-time reads, idempotency."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta

from tests.gql._api import (
    ADD,
    INGEST,
    INGEST_MANY,
    UPDATE,
    audit_total,
    gather_ids,
    ingest,
    read,
    record_total,
    unique,
)
from tests.support import Gateway

RECORD_ID = re.compile(r"^sr_[0-9a-f]{32}$")

VERSIONS = """
query($id: ID!, $asOf: DateTime) {
  record(id: $id, asOf: $asOf) {
    version content
    versions {
      number at event actor content properties lane sourceType authority policyVersion hash
    }
  }
}
"""


async def test_ingest_fills_in_the_defaults(gateway: Gateway) -> None:
    org = unique("Acme-")
    record = await ingest(gateway, "Sarah owns the Acme account.", [f"org:{org}", "person:Sarah"])

    assert RECORD_ID.match(record["id"]), record["id"]
    assert record["lane"] == "default"
    assert record["sourceType"] == "conversational"
    assert record["authority"] == "conversational"
    assert record["content"] == "Sarah owns the Acme account."
    assert record["version"] == 1
    assert record["createdAt"] == record["updatedAt"]
    assert datetime.fromisoformat(record["createdAt"]).tzinfo is not None
    assert record["createdBy"] == "dev"
    assert record["properties"] == [f"org:{org}", "person:Sarah"]
    assert [ep["property"] for ep in record["edgeProperties"]] == record["properties"]

    # Reading it back gives the same record.
    assert await read(gateway, record["id"]) == record


async def test_documentary_source_type_sets_the_authority(gateway: Gateway) -> None:
    record = await ingest(gateway, "The signed contract.", sourceType="documentary")
    assert record["sourceType"] == "documentary"
    assert record["authority"] == "documentary"


async def test_open_lane_refuses_a_source_type_that_is_not_builtin(gateway: Gateway) -> None:
    total = await record_total(gateway)
    error = await gateway.error(INGEST, {"input": {"content": "x", "sourceType": "meeting"}})
    assert error["message"] == (
        "lane 'default' is open — source_type must be a builtin "
        "['conversational', 'documentary'] (got 'meeting')."
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["extensions"]["allowed"] == ["conversational", "documentary"]
    assert await record_total(gateway) == total


async def test_an_unknown_record_reads_as_null(gateway: Gateway) -> None:
    assert await read(gateway, "sr_" + "f" * 32) is None


async def test_ingest_many_writes_every_record_in_order(gateway: Gateway) -> None:
    tag = f"batch:{unique()}"
    inputs = [{"content": f"note {n}", "properties": [tag, f"n:{n}"]} for n in range(3)]
    data = await gateway.data(INGEST_MANY, {"inputs": inputs})
    written = data["ingestMany"]

    assert [r["content"] for r in written] == ["note 0", "note 1", "note 2"]
    assert len({r["id"] for r in written}) == 3
    assert all(r["version"] == 1 for r in written)
    assert sorted(await gather_ids(gateway, [tag])) == sorted(r["id"] for r in written)


async def test_ingest_many_is_all_or_nothing(gateway: Gateway) -> None:
    tag = f"batch:{unique()}"
    good = {"content": "fine", "properties": [tag]}
    labels_before = await gateway.data("{ labels { label recordCount } }")
    records_before = await record_total(gateway)
    audit_before = await audit_total(gateway)

    bad_inputs = [
        {"content": "bad source type", "sourceType": "meeting"},
        {"content": "reserved label", "properties": ["e_group:mine"]},
        {"content": "empty value", "properties": ["org:  "]},
    ]
    for bad in bad_inputs:
        error = await gateway.error(INGEST_MANY, {"inputs": [good, good, bad, good]})
        assert error["extensions"]["code"] == "BAD_USER_INPUT", error

    assert await gather_ids(gateway, [tag]) == []
    assert await record_total(gateway) == records_before
    assert await audit_total(gateway) == audit_before
    assert await gateway.data("{ labels { label recordCount } }") == labels_before


async def test_ingest_many_caps_the_batch(gateway: Gateway) -> None:
    records_before = await record_total(gateway)
    error = await gateway.error(INGEST_MANY, {"inputs": [{"content": "x"}] * 1001})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "at most 1000" in error["message"]
    assert await record_total(gateway) == records_before


async def test_update_writes_a_new_version_and_keeps_the_old_one(gateway: Gateway) -> None:
    org = unique("Acme-")
    first = await ingest(gateway, "draft", [f"org:{org}", "topic:renewal"])
    second = (
        await gateway.data(
            UPDATE, {"id": first["id"], "content": "final", "properties": ["topic:pricing"]}
        )
    )["update"]

    assert second["version"] == 2
    assert second["content"] == "final"
    assert second["properties"] == [f"org:{org}", "topic:pricing"]
    assert second["createdAt"] == first["createdAt"]
    assert second["updatedAt"] > first["updatedAt"]

    history = (await gateway.data(VERSIONS, {"id": first["id"]}))["record"]["versions"]
    assert [v["number"] for v in history] == [1, 2]
    assert [v["event"] for v in history] == ["sr_ingested", "sr_updated"]
    assert history[0]["content"] == "draft"
    assert history[0]["properties"] == [f"org:{org}", "topic:renewal"]
    assert history[0]["at"] == first["updatedAt"]
    assert history[1]["content"] == "final"
    assert history[1]["properties"] == second["properties"]
    assert {v["actor"] for v in history} == {"dev"}
    assert {v["lane"] for v in history} == {"default"}
    assert {v["authority"] for v in history} == {"conversational"}
    assert all(v["policyVersion"] >= 1 for v in history)
    assert history[0]["hash"] != history[1]["hash"]

    # As of version 1's time the record is what version 1 wrote.
    old = await read(gateway, first["id"], as_of=first["updatedAt"])
    assert old is not None
    assert old["version"] == 1
    assert old["content"] == "draft"
    assert old["properties"] == [f"org:{org}", "topic:renewal"]
    assert [ep["property"] for ep in old["edgeProperties"]] == old["properties"]
    old_history = await gateway.data(VERSIONS, {"id": first["id"], "asOf": first["updatedAt"]})
    assert [v["number"] for v in old_history["record"]["versions"]] == [1]

    # Before it was written it did not exist; now it is version 2.
    before = datetime.fromisoformat(first["createdAt"]) - timedelta(seconds=1)
    assert await read(gateway, first["id"], as_of=before.isoformat()) is None
    current = await read(gateway, first["id"])
    assert current is not None
    assert current["version"] == 2


async def test_an_update_that_changes_nothing_writes_nothing(gateway: Gateway) -> None:
    org = unique("Acme-")
    record = await ingest(gateway, "same", [f"org:{org}", "topic:renewal", "person:Sarah"])
    events = await audit_total(gateway, record["id"])
    assert events == 1

    unchanged = [
        {"content": "same"},
        {"properties": []},
        {"properties": ["topic:renewal"]},
        # The labels named hold exactly the values they held, in another order.
        {"properties": ["person:Sarah", f"org:{org}"]},
        {"content": "same", "properties": ["topic: renewal "]},
    ]
    for change in unchanged:
        result = (await gateway.data(UPDATE, {"id": record["id"], **change}))["update"]
        assert result["version"] == 1, change
        assert result["updatedAt"] == record["updatedAt"], change

    assert await audit_total(gateway, record["id"]) == events
    versions = (await gateway.data(VERSIONS, {"id": record["id"]}))["record"]["versions"]
    assert len(versions) == 1
    current = await read(gateway, record["id"])
    assert current is not None
    assert current["properties"] == record["properties"]


async def test_update_with_a_stale_expected_version_is_a_conflict(gateway: Gateway) -> None:
    record = await ingest(gateway, "v1")
    await gateway.data(UPDATE, {"id": record["id"], "content": "v2", "expectedVersion": 1})
    error = await gateway.error(UPDATE, {"id": record["id"], "content": "v3", "expectedVersion": 1})
    assert error["extensions"]["code"] == "CONFLICT"
    assert error["extensions"]["currentVersion"] == 2
    assert "version 2" in error["message"]
    current = await read(gateway, record["id"])
    assert current is not None
    assert (current["version"], current["content"]) == (2, "v2")


async def test_update_of_an_unknown_record_is_not_found(gateway: Gateway) -> None:
    error = await gateway.error(UPDATE, {"id": "sr_" + "e" * 32, "content": "x"})
    assert error["extensions"]["code"] == "NOT_FOUND"
    assert "sr_" + "e" * 32 in error["message"]


async def test_idempotency_key_returns_the_first_record_and_writes_nothing(
    gateway: Gateway,
) -> None:
    key = unique("key-")
    first = await ingest(gateway, "first", ["topic:retry"], idempotencyKey=key)
    records = await record_total(gateway)
    events = await audit_total(gateway)

    again = await ingest(gateway, "first", ["topic:retry"], idempotencyKey=key)
    assert again == first

    # In a batch, the known key returns its record beside the new ones.
    data = await gateway.data(
        INGEST_MANY,
        {
            "inputs": [
                {"content": "new one"},
                {"content": "first", "properties": ["topic:retry"], "idempotencyKey": key},
            ]
        },
    )
    assert data["ingestMany"][1]["id"] == first["id"]
    assert data["ingestMany"][0]["id"] != first["id"]

    assert await record_total(gateway) == records + 1
    assert await audit_total(gateway) == events + 1


async def test_a_reused_idempotency_key_with_other_input_is_a_conflict(gateway: Gateway) -> None:
    key = unique("key-")
    first = await ingest(gateway, "first", ["topic:retry"], idempotencyKey=key)
    records = await record_total(gateway)
    for changed in (
        {"content": "second attempt", "properties": ["topic:retry"]},
        {"content": "first", "properties": ["topic:other"]},
        {"content": "first", "properties": ["topic:retry"], "sourceType": "documentary"},
    ):
        error = await gateway.error(INGEST, {"input": {**changed, "idempotencyKey": key}})
        assert error["extensions"]["code"] == "CONFLICT"
        assert error["extensions"]["idempotencyKey"] == key
        assert error["extensions"]["recordId"] == first["id"]
        assert (
            f"idempotencyKey '{key}' was already used for a different write" in (error["message"])
        )
    assert await record_total(gateway) == records


async def test_an_empty_idempotency_key_is_refused(gateway: Gateway) -> None:
    records = await record_total(gateway)
    for key in ("", "   "):
        error = await gateway.error(INGEST, {"input": {"content": "x", "idempotencyKey": key}})
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert "idempotencyKey is empty" in error["message"]
    assert await record_total(gateway) == records


async def test_one_idempotency_key_twice_in_a_batch_is_refused(gateway: Gateway) -> None:
    key = unique("key-")
    records = await record_total(gateway)
    error = await gateway.error(
        INGEST_MANY,
        {
            "inputs": [
                {"content": "a", "idempotencyKey": key},
                {"content": "b", "idempotencyKey": key},
            ]
        },
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "idempotencyKey" in error["message"]
    assert await record_total(gateway) == records


async def test_records_pages_through_everything_in_writing_order(gateway: Gateway) -> None:
    await gateway.data(INGEST_MANY, {"inputs": [{"content": f"page {n}"} for n in range(7)]})
    query = """
    query($first: Int, $after: String) {
      records(lane: "default", first: $first, after: $after) {
        totalCount items { id createdAt } pageInfo { hasNextPage endCursor }
      }
    }
    """
    seen: list[tuple[str, str]] = []
    after = None
    totals = set()
    while True:
        page = (await gateway.data(query, {"first": 4, "after": after}))["records"]
        totals.add(page["totalCount"])
        seen.extend((item["createdAt"], item["id"]) for item in page["items"])
        if not page["pageInfo"]["hasNextPage"]:
            break
        assert len(page["items"]) == 4
        after = page["pageInfo"]["endCursor"]
    assert len(totals) == 1
    assert len(seen) == totals.pop() >= 7
    assert len(set(seen)) == len(seen)
    keys = [(datetime.fromisoformat(at), rid) for at, rid in seen]
    assert keys == sorted(keys)


async def test_records_filters_by_source_type(gateway: Gateway) -> None:
    doc = await ingest(gateway, "a document", sourceType="documentary")
    chat = await ingest(gateway, "a chat")
    data = await gateway.data(
        """{ records(sourceType: "documentary", first: 500) {
               totalCount items { id sourceType } } }"""
    )
    page = data["records"]
    ids = {item["id"] for item in page["items"]}
    assert doc["id"] in ids
    assert chat["id"] not in ids
    assert {item["sourceType"] for item in page["items"]} == {"documentary"}
    assert page["totalCount"] == len(page["items"])


async def test_concurrent_retries_with_one_key_write_one_record(gateway: Gateway) -> None:
    key = unique("race-")
    records = await record_total(gateway)
    events = await audit_total(gateway)
    written = await asyncio.gather(
        *(ingest(gateway, "attempt", ["topic:race"], idempotencyKey=key) for _ in range(8))
    )
    assert len({r["id"] for r in written}) == 1
    assert all(r == written[0] for r in written)
    assert await record_total(gateway) == records + 1
    assert await audit_total(gateway) == events + 1


async def test_concurrent_changes_to_one_record_each_get_a_version(gateway: Gateway) -> None:
    record = await ingest(gateway, "busy", [])
    changes = await asyncio.gather(
        *(gateway.data(ADD, {"id": record["id"], "properties": [f"n:{n}"]}) for n in range(8))
    )
    versions = sorted(c["addProperties"]["record"]["version"] for c in changes)
    assert versions == list(range(2, 10))
    current = await read(gateway, record["id"])
    assert current is not None
    assert current["version"] == 9
    assert sorted(current["properties"]) == sorted(f"n:{n}" for n in range(8))
    history = (await gateway.data(VERSIONS, {"id": record["id"]}))["record"]["versions"]
    times = [v["at"] for v in history]
    assert [v["number"] for v in history] == list(range(1, 10))
    assert [datetime.fromisoformat(at) for at in times] == sorted(
        datetime.fromisoformat(at) for at in times
    )
    assert len(set(times)) == len(times)


async def test_concurrent_updates_from_one_version_let_one_win(gateway: Gateway) -> None:
    record = await ingest(gateway, "v1")
    bodies = await asyncio.gather(
        *(
            gateway.post(
                UPDATE, {"id": record["id"], "content": f"v2 by {n}", "expectedVersion": 1}
            )
            for n in range(5)
        )
    )
    won = [b for b in bodies if not b.get("errors")]
    lost = [b for b in bodies if b.get("errors")]
    assert len(won) == 1
    assert {b["errors"][0]["extensions"]["code"] for b in lost} == {"CONFLICT"}
    current = await read(gateway, record["id"])
    assert current is not None
    assert current["version"] == 2
    assert current["content"] == won[0]["data"]["update"]["content"]


async def test_content_is_kept_exactly_as_written(gateway: Gateway) -> None:
    # The ledger hashes a canonical JSON form of each state; verify at teardown
    # recomputes it, so characters JSON escapes or normalises would show there.
    content = (
        "quotes \" ' and \\ backslashes\r\n\ttabs, 🦜 emoji, עברית, e\u0301 vs é, "
        "\u2028 line separator, \x7f, trailing spaces   "
    )
    record = await ingest(gateway, content, ["topic:ünïcödé 🦜", 'quote:"x"'])
    assert record["content"] == content
    current = await read(gateway, record["id"])
    assert current is not None
    assert current["content"] == content
    assert current["properties"] == ["topic:ünïcödé 🦜", 'quote:"x"']
    assert await gather_ids(gateway, ["topic:ünïcödé 🦜"]) == [record["id"]]
