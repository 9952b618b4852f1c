"""Ids end to end: deterministic ep_ ids, record id prefixes, ambiguous prefixes."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from store.ids import edge_property_id
from store.kinds.record import commands
from tests.gql._api import ADD, AUDIT, UPDATE, ingest, read
from tests.support import Gateway

ZERO_ID = "sr_" + "0" * 32
# Hard-coded so that any change to the derivation (schema tag, separator,
# encoding, length) fails here, not only in a test that recomputes it.
ZERO_ORG_ACME = "ep_24f614a184b8962f19c711b5a53952ce"


def formula(record_id: str, label: str, value: str) -> str:
    """API.md's derivation, written out independently of store.ids."""
    fact = record_id + "\x1f" + "epg/1" + "\x1f" + label + "\x1f" + value
    return "ep_" + hashlib.sha256(fact.encode("utf-8")).hexdigest()[:32]


def test_the_edge_property_id_of_a_known_fact() -> None:
    assert formula(ZERO_ID, "org", "Acme") == ZERO_ORG_ACME
    assert edge_property_id(ZERO_ID, "org", "Acme") == ZERO_ORG_ACME
    # Label and value are not interchangeable, and the value is hashed as UTF-8.
    assert edge_property_id(ZERO_ID, "Acme", "org") != ZERO_ORG_ACME
    assert edge_property_id(ZERO_ID, "person", "Zoë") == formula(ZERO_ID, "person", "Zoë")


async def test_a_records_edge_property_ids_follow_the_formula(gateway: Gateway) -> None:
    record = await ingest(gateway, "ids", ["org:Acme", "person: Zoë Brontë ", "note"])
    got = {ep["property"]: ep["id"] for ep in record["edgeProperties"]}
    assert got == {
        "org:Acme": formula(record["id"], "org", "Acme"),
        "person:Zoë Brontë": formula(record["id"], "person", "Zoë Brontë"),
        "general:note": formula(record["id"], "general", "note"),
    }
    # The id states a fact about one record: the same label:value elsewhere differs.
    other = await ingest(gateway, "ids", ["org:Acme"])
    assert other["edgeProperties"][0]["id"] != got["org:Acme"]
    # A new version keeps the id of a declaration it still carries.
    updated = (await gateway.data(UPDATE, {"id": record["id"], "content": "ids v2"}))["update"]
    assert {ep["property"]: ep["id"] for ep in updated["edgeProperties"]} == got


async def test_a_unique_prefix_names_a_record(gateway: Gateway) -> None:
    record = await ingest(gateway, "prefix", ["topic:prefix"])
    full = record["id"]
    for ident in (full[:9], full[:12], full[:34], full.upper(), f"  {full[:20]}  "):
        found = await read(gateway, ident)
        assert found is not None, ident
        assert found["id"] == full

    # Every operation that takes a record id takes the prefix.
    short = full[:10]
    updated = (await gateway.data(UPDATE, {"id": short, "content": "prefix v2"}))["update"]
    assert (updated["id"], updated["version"]) == (full, 2)
    added = (await gateway.data(ADD, {"id": short, "properties": ["x:y"]}))["addProperties"]
    assert added["record"]["id"] == full
    audit = (await gateway.data(AUDIT, {"recordId": short}))["audit"]
    assert audit["totalCount"] == 3
    assert {item["recordId"] for item in audit["items"]} == {full}


async def test_a_prefix_nobody_has_reads_as_null(gateway: Gateway) -> None:
    # uuid4 puts the version digit 4 at position 13 of the hex; no written id has an f there.
    nobody = "sr_" + "f" * 13
    assert await read(gateway, nobody) is None
    assert await read(gateway, "sr_" + "f" * 32) is None
    error = await gateway.error(UPDATE, {"id": nobody, "content": "x"})
    assert error["extensions"]["code"] == "NOT_FOUND"
    assert nobody in error["message"]


async def test_malformed_ids_are_refused_with_the_expected_form(gateway: Gateway) -> None:
    for ident in ("sr_abcde", "sr_", "abcdef123456", "sr_abcdefg", "sr_" + "0" * 33, "ep_abcdef"):
        error = await gateway.error("query($id: ID!) { record(id: $id) { id } }", {"id": ident})
        assert error["extensions"]["code"] == "BAD_USER_INPUT", ident
        assert error["message"].startswith(f"'{ident}' is not a valid id"), error
        assert "at least 6" in error["message"]
        error = await gateway.error(UPDATE, {"id": ident, "content": "x"})
        assert error["extensions"]["code"] == "BAD_USER_INPUT", ident


async def test_an_ambiguous_prefix_lists_the_candidates(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ids are random; to share a prefix on purpose, the test picks the random part.
    prefix = "sr_" + uuid.uuid4().hex[:8]
    tails = [f"{n:x}" + "0" * 23 for n in range(1, 7)] + ["1" + "0" * 22 + "1"]
    fresh = iter(prefix + tail for tail in tails)
    monkeypatch.setattr(commands, "new_record_id", lambda: next(fresh))
    written = [(await ingest(gateway, f"twin {n}", ["topic:twins"]))["id"] for n in range(7)]
    monkeypatch.undo()
    assert written == [prefix + tail for tail in tails]

    error = await gateway.error("query($id: ID!) { record(id: $id) { id } }", {"id": prefix})
    assert error["extensions"]["code"] == "AMBIGUOUS_ID"
    candidates = error["extensions"]["candidates"]
    assert candidates == sorted(written)[:5]
    assert prefix in error["message"]
    for candidate in candidates:
        assert candidate in error["message"]

    # Two matches are listed as two.
    error = await gateway.error("query($id: ID!) { record(id: $id) { id } }", {"id": prefix + "1"})
    assert error["extensions"]["code"] == "AMBIGUOUS_ID"
    assert error["extensions"]["candidates"] == sorted([written[0], written[6]])

    # A write through an ambiguous prefix is refused and writes nothing.
    error = await gateway.error(UPDATE, {"id": prefix, "content": "which one?"})
    assert error["extensions"]["code"] == "AMBIGUOUS_ID"
    assert len(error["extensions"]["candidates"]) == 5
    error = await gateway.error(ADD, {"id": prefix + "1", "properties": ["x:y"]})
    assert error["extensions"]["code"] == "AMBIGUOUS_ID"
    for rid in written:
        current = await read(gateway, rid)
        assert current is not None
        assert current["version"] == 1

    # Enough characters single one out; the full id is always exact.
    found = await read(gateway, prefix + "2")
    assert found is not None
    assert found["id"] == written[1]
    found = await read(gateway, written[0])
    assert found is not None
    assert found["id"] == written[0]
