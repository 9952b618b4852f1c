"""Connections end to end: exactly two records, minted ids, versions, events, disconnect."""

from __future__ import annotations

import re

from tests.conftest import GatewayFactory
from tests.gql._api import ingest, unique
from tests.gql._asserted import (
    CONNECT,
    DISCONNECT,
    asserted,
    connect,
    events,
    ids,
)
from tests.gql._policy_support import ingest as ingest_as
from tests.gql._policy_support import mint
from tests.support import Gateway

CONNECT_ID = re.compile(r"^e_connect:works_with_[0-9a-f]{32}$")


async def test_connect_writes_a_minted_value_on_exactly_the_two_records(gateway: Gateway) -> None:
    a = await ingest(gateway, "Sarah owns the Acme account", ["person:Sarah"])
    b = await ingest(gateway, "John runs Acme's IT", ["person:John"])
    edge = await connect(gateway, a["id"], b["id"][:12])
    assert CONNECT_ID.match(edge["id"]), edge["id"]
    assert edge["hint"] == "works_with"
    assert edge["actor"] == "dev" and edge["active"] is True and edge["endedAt"] is None
    assert sorted(ids(edge)) == sorted([a["id"], b["id"]])
    assert all(r["version"] == 2 for r in edge["records"])

    for record in (a, b):
        now = await asserted(gateway, record["id"])
        assert now["version"] == 2
        # An asserted edge is not one of the caller's properties ...
        assert now["properties"] == record["properties"]
        # ... but it is a hyperedge of the record, with exactly two members.
        shown = {ep["property"]: ep["memberCount"] for ep in now["edgeProperties"]}
        assert shown[edge["id"]] == 2
        assert [c["id"] for c in now["connections"]] == [edge["id"]]
        assert now["versions"][-1]["event"] == "connected"
        kinds = [kind for kind, _ in await events(gateway, record["id"])]
        assert kinds == ["sr_ingested", "connected"]
    _, payload = (await events(gateway, a["id"]))[-1]
    assert payload["property"] == edge["id"] and payload["other"] == b["id"]


async def test_two_connections_between_the_same_records_are_two_edges(gateway: Gateway) -> None:
    a = (await ingest(gateway, "a"))["id"]
    b = (await ingest(gateway, "b"))["id"]
    first = await connect(gateway, a, b, "reports_to")
    second = await connect(gateway, b, a, "reports_to")
    assert first["id"] != second["id"]
    assert len((await asserted(gateway, a))["connections"]) == 2


async def test_connect_refuses_one_record_and_cannot_take_three(gateway: Gateway) -> None:
    a = (await ingest(gateway, "alone"))["id"]
    error = await gateway.error(CONNECT, {"a": a, "b": a[:10], "hint": "self"})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "exactly two distinct records" in error["message"]
    assert "use group" in error["message"]
    b = (await ingest(gateway, "b"))["id"]
    c = (await ingest(gateway, "c"))["id"]
    error = await gateway.error(
        'mutation($a: ID!, $b: ID!, $c: ID!) { connect(a: $a, b: $b, c: $c, hint: "x") { id } }',
        {"a": a, "b": b, "c": c},
    )
    assert "Unknown argument 'c'" in error["message"]
    for record_id in (a, b, c):
        assert (await asserted(gateway, record_id))["version"] == 1


async def test_hints_are_validated_with_what_is_allowed(gateway: Gateway) -> None:
    a = (await ingest(gateway, "a"))["id"]
    b = (await ingest(gateway, "b"))["id"]
    # A trailing newline too: it would put a control character into the minted value.
    for hint in ["", "works with", "x:y", "é", "h" * 65, "a/b", "x\n"]:
        error = await gateway.error(CONNECT, {"a": a, "b": b, "hint": hint})
        assert error["extensions"]["code"] == "BAD_USER_INPUT", hint
        assert "a letter (a-z, A-Z), a digit (0-9), '_' or '-'" in error["message"], hint
    edge = await connect(gateway, a, b, "Works-With_2")
    assert edge["hint"] == "Works-With_2"


async def test_disconnect_removes_it_from_both_as_new_versions(gateway: Gateway) -> None:
    a = (await ingest(gateway, "a", ["topic:x"]))["id"]
    b = (await ingest(gateway, "b"))["id"]
    edge = await connect(gateway, a, b)
    gone = (await gateway.data(DISCONNECT, {"id": edge["id"]}))["disconnect"]
    assert gone["id"] == edge["id"] and gone["active"] is False
    assert gone["endedBy"] == "dev" and gone["endedAt"] >= gone["createdAt"]
    assert sorted(ids(gone)) == sorted([a, b])
    for record_id in (a, b):
        now = await asserted(gateway, record_id)
        assert now["version"] == 3 and now["connections"] == []
        assert edge["id"] not in [ep["property"] for ep in now["edgeProperties"]]
        assert [kind for kind, _ in await events(gateway, record_id)][-1] == "disconnected"
    # The connection is kept in history: as of when it was made, the record was on it.
    then = await asserted(gateway, a, as_of=gone["createdAt"])
    assert then["version"] == 2
    [was] = then["connections"]
    assert was["id"] == edge["id"] and was["active"] is True
    assert sorted(ids(was)) == sorted([a, b])
    # Again: it exists and has ended, and nothing changes.
    error = await gateway.error(DISCONNECT, {"id": edge["id"]})
    assert error["message"] == (
        f"connection '{edge['id']}' has ended already, at {gone['endedAt']} by dev; nothing "
        "changed (it is still read as it was when it ended)"
    )
    assert error["extensions"]["code"] == "CONFLICT"
    assert error["extensions"]["ended"] == {"at": gone["endedAt"], "actor": "dev"}
    assert (await asserted(gateway, a))["version"] == 3
    # One that never existed is still unknown.
    never = edge["id"][:-32] + "0" * 32
    error = await gateway.error(DISCONNECT, {"id": never})
    assert error["extensions"]["code"] == "NOT_FOUND"
    # Only its value may be given: a bare hint or another kind's id is refused.
    error = await gateway.error(DISCONNECT, {"id": "works_with"})
    assert "expected e_connect:<hint>_<32 hex>" in error["message"]


async def test_disconnect_by_value_without_the_label(gateway: Gateway) -> None:
    a = (await ingest(gateway, "a"))["id"]
    b = (await ingest(gateway, "b"))["id"]
    edge = await connect(gateway, a, b)
    value = edge["id"].split(":", 1)[1]
    gone = (await gateway.data(DISCONNECT, {"id": value}))["disconnect"]
    assert gone["active"] is False


POLICY = """
lanes:
  alpha: {}
  beta: {}
agents:
  a: { read: [alpha], write: [alpha] }
  both: { read: [alpha, beta], write: [alpha, beta] }
  reader: { read: [alpha, beta], write: [alpha] }
"""


async def test_a_connection_needs_write_access_to_both_lanes_and_hides_unreadable_ends(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(POLICY)
    tokens = await mint(gateway, "a", "both", "reader")
    mark = unique("c")
    x = (await ingest_as(gateway, tokens["both"], content=mark, lane="alpha"))["id"]
    y = (await ingest_as(gateway, tokens["both"], content=mark, lane="beta"))["id"]
    # reader may read beta but not write it: refused, naming the lanes it may write.
    error = await gateway.error(CONNECT, {"a": x, "b": y, "hint": "h"}, tokens["reader"])
    assert error["extensions"]["code"] == "FORBIDDEN"
    assert "beta" in error["message"]
    edge = (await gateway.data(CONNECT, {"a": x, "b": y, "hint": "h"}, tokens["both"]))["connect"]
    # Agent a sees the connection on its record, but never the record in beta.
    seen = await asserted(gateway, x, token=tokens["a"])
    assert [ids(c) for c in seen["connections"]] == [[x]]
    error = await gateway.error(DISCONNECT, {"id": edge["id"]}, tokens["a"])
    assert error["extensions"]["code"] == "FORBIDDEN"
    assert "lanes you may not read" in error["message"]
    assert y not in error["message"]
    gone = (await gateway.data(DISCONNECT, {"id": edge["id"]}, tokens["both"]))["disconnect"]
    assert sorted(ids(gone)) == sorted([x, y])
