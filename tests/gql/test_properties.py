"""Edge properties end to end: parsing, reserved labels, add, update merge, remove, audit."""

from __future__ import annotations

from typing import Any

from tests.gql._api import (
    ADD,
    AUDIT,
    REMOVE,
    UPDATE,
    audit_total,
    ingest,
    read,
    record_total,
    unique,
)
from tests.support import Gateway

EVENT = """
query($id: ID!) {
  auditEvent(id: $id) {
    id kind recordId lane actor payload
    before { number content properties }
    after { number content properties }
  }
}
"""


async def events_of(gateway: Gateway, record_id: str) -> list[dict[str, Any]]:
    data = await gateway.data(AUDIT, {"recordId": record_id, "first": 500})
    items: list[dict[str, Any]] = data["audit"]["items"]
    return items


# -- parsing ------------------------------------------------------------------


async def test_a_property_string_is_split_at_the_first_colon_and_cleaned(
    gateway: Gateway,
) -> None:
    record = await ingest(
        gateway,
        "parsing",
        [
            "org:  Acme  Corp ",
            "account manager:Sarah",
            "  deal  stage :won",
            "url:https://example.com:8443/a",
            "a note without a colon",
            "Org:Acme",
        ],
    )
    assert record["properties"] == [
        "org:Acme  Corp",
        "account_manager:Sarah",
        "deal__stage:won",
        "url:https://example.com:8443/a",
        "general:a note without a colon",
        "Org:Acme",
    ]
    by_property = {ep["property"]: ep for ep in record["edgeProperties"]}
    assert by_property["url:https://example.com:8443/a"]["label"] == "url"
    assert by_property["url:https://example.com:8443/a"]["value"] == "https://example.com:8443/a"
    assert by_property["org:Acme  Corp"]["value"] == "Acme  Corp"


async def test_repeated_values_are_written_once(gateway: Gateway) -> None:
    record = await ingest(gateway, "dups", ["org:Acme", " org : Acme", "org:Acme"])
    assert record["properties"] == ["org:Acme"]


async def test_an_empty_label_or_value_is_refused_with_a_sentence(gateway: Gateway) -> None:
    cases = {
        ":Acme": "empty label",
        "  :Acme": "empty label",
        "org:": "empty value",
        "org:   ": "empty value",
        "   ": "empty value",
    }
    for text, problem in cases.items():
        error = await gateway.error(
            'mutation($p: [String!]) { ingest(input: {content: "x", properties: $p}) { id } }',
            {"p": ["topic:fine", text]},
        )
        assert error["extensions"]["code"] == "BAD_USER_INPUT", text
        assert problem in error["message"], (text, error["message"])
        assert "for example org:Acme" in error["message"]
        assert error["extensions"]["property"] == text


async def test_update_and_add_refuse_empty_labels_too(gateway: Gateway) -> None:
    record = await ingest(gateway, "x", ["topic:a"])
    error = await gateway.error(UPDATE, {"id": record["id"], "properties": [":b"]})
    assert "empty label" in error["message"]
    error = await gateway.error(ADD, {"id": record["id"], "properties": ["topic:"]})
    assert "empty value" in error["message"]
    assert await audit_total(gateway, record["id"]) == 1


async def test_over_long_labels_and_values_are_refused(gateway: Gateway) -> None:
    query = 'mutation($p: [String!]) { ingest(input: {content: "x", properties: $p}) { id } }'
    error = await gateway.error(query, {"p": ["l" * 129 + ":v"]})
    assert "at most 128 characters" in error["message"]
    assert (await gateway.data(query, {"p": ["l" * 128 + ":v"]}))["ingest"]["id"]
    error = await gateway.error(query, {"p": ["org:" + "v" * 1025]})
    assert "at most 1024 characters" in error["message"]
    assert (await gateway.data(query, {"p": ["org:" + "v" * 1024]}))["ingest"]["id"]
    error = await gateway.error(query, {"p": [f"n{n}:v" for n in range(257)]})
    assert "at most 256" in error["message"]


async def test_control_characters_are_refused_naming_them(gateway: Gateway) -> None:
    """U+001F separates the parts of an ep_ id: `a\x1fb:c` and `a:b\x1fc` would share one."""
    query = 'mutation($p: [String!]) { ingest(input: {content: "x", properties: $p}) { id } }'
    before = await record_total(gateway)
    error = await gateway.error(query, {"p": ["a\u001fb:c"]})
    assert error["extensions"]["code"] == "BAD_USER_INPUT", error
    assert "U+001F" in error["message"], error
    assert error["extensions"]["property"] == "a\u001fb:c"
    error = await gateway.error(query, {"p": ["a\u001fb:c", "a:b\u001fc"]})
    assert error["extensions"]["code"] == "BAD_USER_INPUT", error
    record = await ingest(gateway, "x", ["topic:fine"])
    for text in ("topic:a\u0000b", "to\u007fpic:x"):
        error = await gateway.error(ADD, {"id": record["id"], "properties": [text]})
        assert error["extensions"]["code"] == "BAD_USER_INPUT", error
    assert await record_total(gateway) == before + 1


# -- reserved labels ------------------------------------------------------------


async def test_ingest_and_update_refuse_reserved_labels(gateway: Gateway) -> None:
    error = await gateway.error(
        'mutation { ingest(input: {content: "x", properties: ["org:A", "e_connect:x_1"]}) { id } }'
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "e_connect" in error["message"]
    assert "reserved" in error["message"]
    assert error["extensions"]["labels"] == ["e_connect"]

    record = await ingest(gateway, "x", ["org:A"])
    error = await gateway.error(UPDATE, {"id": record["id"], "properties": ["e_group:g"]})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "e_group" in error["message"]
    current = await read(gateway, record["id"])
    assert current is not None
    assert current["version"] == 1


async def test_add_properties_reports_reserved_labels_under_rejected(gateway: Gateway) -> None:
    record = await ingest(gateway, "x", ["org:A"])
    change = (
        await gateway.data(
            ADD, {"id": record["id"], "properties": ["e_group:sneaky", "topic:fine", "e_x:y"]}
        )
    )["addProperties"]
    assert change["rejected"] == ["e_group:sneaky", "e_x:y"]
    assert change["added"] == ["topic:fine"]
    assert change["alreadyHeld"] == []
    assert change["record"]["properties"] == ["org:A", "topic:fine"]
    assert change["record"]["version"] == 2


async def test_remove_properties_refuses_reserved_labels(gateway: Gateway) -> None:
    record = await ingest(gateway, "x", ["org:A"])
    for args in ({"labels": ["e_group"]}, {"properties": ["e_connect:x_1"]}):
        error = await gateway.error(REMOVE, {"id": record["id"], **args})
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert "reserved" in error["message"]


# -- add ----------------------------------------------------------------------------


async def test_add_properties_is_add_only_and_reports_what_is_held(gateway: Gateway) -> None:
    org = unique("Acme-")
    record = await ingest(gateway, "add", [f"org:{org}", "topic:renewal"])

    change = (
        await gateway.data(
            ADD,
            {
                "id": record["id"],
                "properties": ["topic:renewal", "topic:pricing", "person:Sarah", "person: Sarah"],
            },
        )
    )["addProperties"]
    assert change["added"] == ["topic:pricing", "person:Sarah"]
    assert change["alreadyHeld"] == ["topic:renewal", "person:Sarah"]
    assert change["rejected"] == []
    assert change["record"]["version"] == 2
    # Add never replaces: both topics are held.
    assert change["record"]["properties"] == [
        f"org:{org}",
        "topic:renewal",
        "topic:pricing",
        "person:Sarah",
    ]

    events = await events_of(gateway, record["id"])
    added = [e for e in events if e["kind"] == "property_added"]
    assert [e["payload"]["property"] for e in added] == ["topic:pricing", "person:Sarah"]
    assert all(e["recordId"] == record["id"] and e["actor"] == "dev" for e in added)
    assert added[0]["payload"]["label"] == "topic"
    assert added[0]["payload"]["value"] == "pricing"
    ids = {ep["property"]: ep["id"] for ep in change["record"]["edgeProperties"]}
    assert [e["payload"]["edgePropertyId"] for e in added] == [
        ids["topic:pricing"],
        ids["person:Sarah"],
    ]


async def test_adding_only_held_values_writes_nothing(gateway: Gateway) -> None:
    record = await ingest(gateway, "held", ["topic:a"])
    change = (await gateway.data(ADD, {"id": record["id"], "properties": ["topic: a"]}))[
        "addProperties"
    ]
    assert change["added"] == []
    assert change["alreadyHeld"] == ["topic:a"]
    assert change["record"]["version"] == 1
    assert await audit_total(gateway, record["id"]) == 1


# -- update merge ----------------------------------------------------------------


async def test_update_replaces_the_named_labels_and_keeps_the_others(gateway: Gateway) -> None:
    org = unique("Acme-")
    record = await ingest(
        gateway, "merge", [f"org:{org}", "topic:renewal", "topic:pricing", "person:Sarah"]
    )
    updated = (
        await gateway.data(UPDATE, {"id": record["id"], "properties": ["topic:churn", "stage:won"]})
    )["update"]
    assert updated["version"] == 2
    assert updated["content"] == "merge"
    assert updated["properties"] == [f"org:{org}", "person:Sarah", "topic:churn", "stage:won"]

    events = await events_of(gateway, record["id"])
    assert [e["kind"] for e in events] == ["sr_ingested", "sr_updated"]
    payload = events[1]["payload"]
    assert payload["contentChanged"] is False
    assert sorted(payload["added"]) == ["stage:won", "topic:churn"]
    assert sorted(payload["removed"]) == ["topic:pricing", "topic:renewal"]


async def test_update_refuses_more_edge_properties_than_a_record_may_carry(
    gateway: Gateway,
) -> None:
    record = await ingest(gateway, "full", [f"n{n}:v" for n in range(256)])
    assert len(record["properties"]) == 256
    error = await gateway.error(UPDATE, {"id": record["id"], "properties": ["one:more"]})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "at most 256" in error["message"]
    error = await gateway.error(ADD, {"id": record["id"], "properties": ["one:more"]})
    assert "at most 256" in error["message"]
    current = await read(gateway, record["id"])
    assert current is not None
    assert current["version"] == 1


# -- remove -------------------------------------------------------------------------


async def test_remove_a_whole_label_emits_one_event_per_value(gateway: Gateway) -> None:
    org = unique("Acme-")
    record = await ingest(gateway, "rm", [f"org:{org}", "topic:a", "topic:b", "person:S"])
    change = (await gateway.data(REMOVE, {"id": record["id"], "labels": ["topic", "missing"]}))[
        "removeProperties"
    ]
    assert change["removed"] == ["topic:a", "topic:b"]
    assert change["notHeld"] == ["missing"]
    assert change["record"]["version"] == 2
    assert change["record"]["properties"] == [f"org:{org}", "person:S"]

    events = await events_of(gateway, record["id"])
    removed = [e for e in events if e["kind"] == "property_removed"]
    assert [e["payload"]["property"] for e in removed] == ["topic:a", "topic:b"]


async def test_remove_cleans_label_names_like_writes_do(gateway: Gateway) -> None:
    record = await ingest(gateway, "rm", ["deal stage:won", "topic:a"])
    assert record["properties"][0] == "deal_stage:won"
    change = (await gateway.data(REMOVE, {"id": record["id"], "labels": [" deal stage "]}))[
        "removeProperties"
    ]
    assert change["removed"] == ["deal_stage:won"]
    assert change["record"]["properties"] == ["topic:a"]


async def test_remove_single_values(gateway: Gateway) -> None:
    record = await ingest(gateway, "rm", ["topic:a", "topic:b", "person:S", "just text"])
    change = (
        await gateway.data(
            REMOVE,
            {"id": record["id"], "properties": ["topic: a ", "person:Nobody", "just text"]},
        )
    )["removeProperties"]
    assert change["removed"] == ["topic:a", "general:just text"]
    assert change["notHeld"] == ["person:Nobody"]
    assert change["record"]["properties"] == ["topic:b", "person:S"]
    assert (
        len([e for e in await events_of(gateway, record["id"]) if e["kind"] == "property_removed"])
        == 2
    )


async def test_remove_by_labels_and_properties_together(gateway: Gateway) -> None:
    record = await ingest(gateway, "rm", ["topic:a", "topic:b", "person:S", "org:O"])
    change = (
        await gateway.data(
            REMOVE, {"id": record["id"], "labels": ["topic"], "properties": ["org:O"]}
        )
    )["removeProperties"]
    assert change["removed"] == ["topic:a", "topic:b", "org:O"]
    assert change["record"]["properties"] == ["person:S"]
    assert change["record"]["version"] == 2


async def test_removing_what_is_not_held_writes_nothing(gateway: Gateway) -> None:
    record = await ingest(gateway, "rm", ["topic:a"])
    change = (
        await gateway.data(
            REMOVE, {"id": record["id"], "labels": ["person"], "properties": ["topic:b"]}
        )
    )["removeProperties"]
    assert change["removed"] == []
    assert change["notHeld"] == ["person", "topic:b"]
    assert change["record"]["version"] == 1
    assert await audit_total(gateway, record["id"]) == 1


async def test_remove_needs_something_to_remove(gateway: Gateway) -> None:
    record = await ingest(gateway, "rm", ["topic:a"])
    error = await gateway.error(REMOVE, {"id": record["id"]})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "labels" in error["message"]


# -- audit ------------------------------------------------------------------------------


async def test_each_change_is_an_audit_event_with_the_versions_around_it(
    gateway: Gateway,
) -> None:
    record = await ingest(gateway, "v1", ["topic:a"])
    await gateway.data(UPDATE, {"id": record["id"], "content": "v2"})
    await gateway.data(ADD, {"id": record["id"], "properties": ["person:S", "org:O"]})
    await gateway.data(REMOVE, {"id": record["id"], "labels": ["topic"]})

    events = await events_of(gateway, record["id"])
    assert [e["kind"] for e in events] == [
        "sr_ingested",
        "sr_updated",
        "property_added",
        "property_added",
        "property_removed",
    ]
    cursors = [int(e["cursor"]) for e in events]
    assert cursors == sorted(cursors)
    assert all(e["lane"] == "default" for e in events)
    assert events[0]["payload"]["properties"] == ["topic:a"]
    assert events[0]["payload"]["sourceType"] == "conversational"

    def detail(n: int) -> Any:
        return gateway.data(EVENT, {"id": events[n]["id"]})

    ingested = (await detail(0))["auditEvent"]
    assert ingested["before"] is None
    assert ingested["after"] == {"number": 1, "content": "v1", "properties": ["topic:a"]}

    updated = (await detail(1))["auditEvent"]
    assert updated["kind"] == "sr_updated"
    assert updated["before"] == {"number": 1, "content": "v1", "properties": ["topic:a"]}
    assert updated["after"] == {"number": 2, "content": "v2", "properties": ["topic:a"]}

    # Both values added in one call share the version they wrote.
    for n in (2, 3):
        added = (await detail(n))["auditEvent"]
        assert added["before"]["number"] == 2
        assert added["after"] == {
            "number": 3,
            "content": "v2",
            "properties": ["topic:a", "person:S", "org:O"],
        }

    removed = (await detail(4))["auditEvent"]
    assert removed["payload"]["property"] == "topic:a"
    assert removed["before"]["number"] == 3
    assert removed["after"] == {"number": 4, "content": "v2", "properties": ["person:S", "org:O"]}

    only_added = await gateway.data(AUDIT, {"recordId": record["id"], "kinds": ["property_added"]})
    assert only_added["audit"]["totalCount"] == 2


async def test_audit_pages_with_cursors(gateway: Gateway) -> None:
    record = await ingest(gateway, "paged", [])
    await gateway.data(ADD, {"id": record["id"], "properties": [f"n:{n}" for n in range(5)]})
    seen: list[str] = []
    after = None
    while True:
        page = (await gateway.data(AUDIT, {"recordId": record["id"], "first": 2, "after": after}))[
            "audit"
        ]
        assert page["totalCount"] == 6
        seen.extend(e["id"] for e in page["items"])
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert len(seen) == len(set(seen)) == 6


LAST = """
query($recordId: ID, $first: Int, $last: Int, $after: String) {
  audit(recordId: $recordId, first: $first, last: $last, after: $after) {
    totalCount items { cursor kind } pageInfo { hasNextPage endCursor }
  }
}
"""


async def test_audit_last_gives_the_newest_events_oldest_first(gateway: Gateway) -> None:
    record = await ingest(gateway, "newest", [])
    await gateway.data(ADD, {"id": record["id"], "properties": [f"n:{n}" for n in range(5)]})
    every = (await gateway.data(LAST, {"recordId": record["id"]}))["audit"]["items"]
    newest = (await gateway.data(LAST, {"recordId": record["id"], "last": 2}))["audit"]
    assert newest["items"] == every[-2:]
    assert newest["totalCount"] == 6
    assert newest["pageInfo"] == {"hasNextPage": False, "endCursor": every[-1]["cursor"]}
    after = {"recordId": record["id"], "last": 10, "after": every[2]["cursor"]}
    assert (await gateway.data(LAST, after))["audit"]["items"] == every[3:]
    both = await gateway.post(LAST, {"first": 2, "last": 2})
    assert both["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert "not both" in both["errors"][0]["message"]


async def test_an_unknown_audit_event_reads_as_null(gateway: Gateway) -> None:
    data = await gateway.data(EVENT, {"id": "ae_" + "0" * 32})
    assert data["auditEvent"] is None
