"""A label's values from the maintained counts, the values near one, and what a write
introducing a value near an existing one is told."""

from __future__ import annotations

from asyncpg import Connection

from policies.properties import Property
from store.kinds.record.reads.values import near, values
from tests.gql._api import ingest, unique
from tests.store import _two_lanes
from tests.support import Gateway

# The module's gateway and a plain connection to its database.
gateway, conn = _two_lanes.gateway, _two_lanes.conn


async def write(gateway: Gateway, label: str, value: str, n: int, lane: str = "notes") -> None:
    for _ in range(n):
        await ingest(gateway, "x", [f"{label}:{value}"], lane=lane)


async def test_values_with_readable_counts_in_value_order(
    gateway: Gateway, conn: Connection
) -> None:
    label = unique("org")
    await write(gateway, label, "Acme", 3)
    await write(gateway, label, "Beta", 1)
    await write(gateway, label, "Beta", 2, lane="secret")
    await write(gateway, label, "Hidden", 1, lane="secret")

    both = await values(conn, label, ["notes", "secret"], None, None, None, None)
    assert [(v.value, v.member_count) for v in both.items] == [
        ("Acme", 3),
        ("Beta", 3),
        ("Hidden", 1),
    ]
    mine = await values(conn, label, ["notes"], None, None, None, None)
    assert [(v.value, v.member_count) for v in mine.items] == [("Acme", 3), ("Beta", 1)]
    assert mine.items[0].property == f"{label}:Acme"
    started = await values(conn, label, ["notes", "secret"], "B", None, None, None)
    assert [v.value for v in started.items] == ["Beta"]
    first = await values(conn, label, ["notes", "secret"], None, None, 2, None)
    assert first.has_next_page
    rest = await values(conn, label, ["notes", "secret"], None, None, 2, first.end_cursor)
    assert [v.value for v in rest.items] == ["Hidden"] and not rest.has_next_page
    assert (await values(conn, "e_adjustment", ["notes"], None, None, None, None)).items == []


async def test_similar_values_by_case_accents_spacing_and_one_edit(
    gateway: Gateway, conn: Connection
) -> None:
    label = unique("org")
    for value in ("Acme Inc", "Café Noir", "Globex", "Initech", "Umbrella Corp"):
        await write(gateway, label, value, 1)
    await write(gateway, label, "Acme, inc.", 1, lane="secret")

    def similar(value: str, lanes: list[str] | None = None) -> list[str]:
        return [v.value for v in found[(value, tuple(lanes or ["notes", "secret"]))].items]

    found = {}
    asks = [
        ("ACME-INC", None),
        ("cafe noir", None),
        ("Glbex", None),
        ("Initecj", None),
        ("Inittech", None),
        ("Gloxeb", None),
        ("ACME-INC", ["notes"]),
        ("Acme Inc", None),
    ]
    for value, lanes in asks:
        found[(value, tuple(lanes or ["notes", "secret"]))] = await values(
            conn, label, lanes or ["notes", "secret"], None, value, None, None
        )
    assert similar("ACME-INC") == ["Acme Inc", "Acme, inc."]
    assert similar("cafe noir") == ["Café Noir"]
    assert similar("Glbex") == ["Globex"]  # a letter left out
    assert similar("Initecj") == ["Initech"]  # a letter changed
    assert similar("Inittech") == ["Initech"]  # a letter added
    assert similar("Gloxeb") == []  # two edits apart
    # A lane the caller cannot read contributes nothing.
    assert similar("ACME-INC", ["notes"]) == ["Acme Inc"]
    # The value asked about is not near itself.
    assert similar("Acme Inc") == ["Acme, inc."]


async def test_a_new_value_near_an_existing_one_is_named(
    gateway: Gateway, conn: Connection
) -> None:
    label = unique("org")
    await write(gateway, label, "Acme", 3)
    await write(gateway, label, "ACME.", 5, lane="secret")
    await write(gateway, label, "ACME", 1)
    new, old = Property(label, "ACME"), Property(label, "Acme")
    told = await near(conn, {new: 1, old: 1}, ["notes", "secret"])
    assert {p: [(v.value, v.member_count) for v in vs] for p, vs in told.items()} == {
        new: [("ACME.", 5), ("Acme", 3)]
    }
    mine = await near(conn, {new: 1}, ["notes"])
    assert [(v.value, v.member_count) for v in mine[new]] == [("Acme", 3)]
