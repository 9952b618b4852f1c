"""The visibility rule on its own: what each slot renders, and which rows each selects
on a table of the test's own, in both dialects (`$n` text and SQLAlchemy Core)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from asyncpg import Connection
from sqlalchemy import Column, DateTime, MetaData, Table, Text, select
from sqlalchemy.dialects.postgresql import JSONB

from policies.properties import Property
from store.reads.core_sql import fetch
from store.reads.visibility import CORE_AT, CORE_LANES, RULE, Rule, core
from tests.support import Databases, sql

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T = T0 + timedelta(days=10)  # the instant read at
BEFORE, AFTER = T - timedelta(days=1), T + timedelta(days=1)
RETIRING = Rule(retired="retired_at")

things = Table(
    "things",
    MetaData(),
    Column("id", Text),
    Column("lane", Text),
    Column("label", Text),
    Column("retired_at", DateTime(timezone=True)),
    Column("recorded_from", DateTime(timezone=True)),
    Column("recorded_to", DateTime(timezone=True)),
    Column("at", DateTime(timezone=True)),
    Column("valid_at", DateTime(timezone=True)),
    Column("invalid_at", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True)),
    Column("to_lane", Text),
    Column("payload", JSONB),
)

# id, lane, label, retired_at, recorded_from, recorded_to, at, valid_at, invalid_at, created_at
ROWS: list[tuple[Any, ...]] = [
    ("open", "notes", "org", None, T0, None, BEFORE, T0, None, T0),
    ("hidden", "private", "org", None, T0, None, BEFORE, T0, None, T0),
    ("laneless", None, "org", None, T0, None, BEFORE, T0, None, T0),
    ("retired_before", "notes", "e_group", BEFORE, T0, BEFORE, BEFORE, T0, BEFORE, T0),
    ("retired_after", "notes", "e_adjustment", AFTER, T0, AFTER, AFTER, T0, AFTER, T0),
    ("later", "notes", "org", None, AFTER, None, AFTER, AFTER, None, AFTER),
    ("recorded_later", "notes", "org", None, T0, None, BEFORE, T0, None, AFTER),
]
# A typed edge's other end is in the edge's own lane here, and no payload names a lane.
FULL_ROWS = [(*r, "private" if r[0] == "hidden" else "notes", "{}") for r in ROWS]
# An edge (and its event) joining a readable record to one in a lane the reader cannot
# read; added by the tests about it.
TO_HIDDEN = """
INSERT INTO things (id, lane, valid_at, created_at, to_lane, payload)
VALUES ('to_hidden', 'notes', $1, $1, 'private', '{"toLane": "private"}')
"""


@pytest.fixture(scope="module")
async def url(databases: Databases) -> str:
    return await databases.create()


@pytest.fixture
async def conn(url: str) -> AsyncIterator[Connection]:
    async with sql(url) as connection:
        await connection.execute(
            "CREATE TEMP TABLE things (id text, lane text, label text, retired_at timestamptz, "
            "recorded_from timestamptz, recorded_to timestamptz, at timestamptz, "
            "valid_at timestamptz, invalid_at timestamptz, created_at timestamptz, "
            "to_lane text, payload jsonb, from_id text, to_id text, expires_at timestamptz, "
            "record_id text)"
        )
        await connection.executemany(
            "INSERT INTO things VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
            "$12::text::jsonb)",
            FULL_ROWS,
        )
        yield connection


async def ids(conn: Connection, where: str, *args: Any) -> set[str]:
    return {r["id"] for r in await conn.fetch(f"SELECT id FROM things t WHERE {where}", *args)}


async def core_ids(conn: Connection, where: str, **params: Any) -> set[str]:
    query = select(things.c.id).where(core(where))
    return {r["id"] for r in await fetch(conn, query, params)}


def test_each_slot_renders_its_predicate() -> None:
    assert RULE.lane("r", "$2::text[]") == "r.lane = ANY($2::text[])"
    assert RULE.lane("", "$2::text[]") == "lane = ANY($2::text[])"
    assert RULE.in_lane("m1", "m0.lane") == "m1.lane = m0.lane"
    assert RULE.event("e", "$1") == (
        "(e.lane = ANY($1) OR e.lane IS NULL) "
        "AND (e.payload->>'toLane' IS NULL OR e.payload->>'toLane' = ANY($1))"
    )
    # Without the retired slot the record rule is the lane rule; the rule in force has it.
    assert Rule(retired=None).record("r", "$1", "$3") == RULE.lane("r", "$1")
    assert RULE.record("r", "$1", "$3") == RETIRING.record("r", "$1", "$3")
    assert RETIRING.record("r", "$1") == (
        "r.lane = ANY($1) AND r.retired_at IS NULL "
        "AND (r.expires_at IS NULL OR r.expires_at > edgeloom_now())"
    )
    assert RULE.retired_now("r", "$1") == (
        "r.lane = ANY($1) AND (r.retired_at IS NOT NULL OR r.expires_at <= edgeloom_now())"
    )
    assert RULE.alive("v") == "v.state->'retired' IS NULL"
    assert RULE.alive("v", "$2") == (
        "v.state->'retired' IS NULL AND (v.state->>'expires_at' IS NULL "
        "OR (v.state->>'expires_at')::timestamptz > $2)"
    )
    assert RULE.alive_state({"content": "x"}) and not RULE.alive_state({"retired": {}})
    assert RETIRING.record("r", "$1", "$3") == (
        "r.lane = ANY($1) AND (r.retired_at IS NULL OR r.retired_at > $3) "
        "AND (r.expires_at IS NULL OR r.expires_at > $3)"
    )
    pending = (
        "NOT EXISTS (SELECT 1 FROM records xe_ WHERE xe_.id = {} "
        "AND xe_.retired_at IS NULL AND xe_.expires_at <= edgeloom_now())"
    )
    assert RETIRING.record_in_lane("q", "l.lane") == (
        "q.lane = l.lane AND q.retired_at IS NULL AND " + pending.format("q.id")
    )
    assert RULE.held("m", None) == "m.recorded_to IS NULL"
    assert RULE.held("m", "$4") == (
        "m.recorded_from <= $4 AND (m.recorded_to IS NULL OR m.recorded_to > $4)"
    )
    assert RULE.member("m", "$3", None) == (
        "m.lane = ANY($3) AND m.recorded_to IS NULL AND " + pending.format("m.record_id")
    )
    assert RULE.unexpired("m.record_id", "$4") == (
        "NOT EXISTS (SELECT 1 FROM records xe_ WHERE xe_.id = m.record_id AND xe_.expires_at <= $4)"
    )
    assert RULE.correction("c", "$1", None) == "c.lane = ANY($1)"
    assert RULE.correction("c", "$1", "$2") == "c.lane = ANY($1) AND c.at <= $2"
    assert RULE.shown_label("m.label") == (
        "m.label <> 'e_adjustment' AND NOT (left(m.label, 7) = 'e_meta_')"
    )
    assert RULE.metadata_label("x.p->>0") == "left(x.p->>0, 7) = 'e_meta_'"
    assert RULE.caller_label("x.p->>0") == "left(x.p->>0, 2) <> 'e_'"
    ends_kept_at = (
        "AND NOT EXISTS (SELECT 1 FROM unnest(ARRAY[g.from_id, g.to_id]) AS x_(id) "
        "CROSS JOIN LATERAL (SELECT v_.state FROM ledger v_ WHERE v_.kind = 'record' "
        "AND v_.object_id = x_.id AND v_.at <= $2 ORDER BY v_.version DESC LIMIT 1) v_ "
        "WHERE NOT (v_.state->'retired' IS NULL AND (v_.state->>'expires_at' IS NULL "
        "OR (v_.state->>'expires_at')::timestamptz > $2)))"
    )
    assert RULE.edge("g", "$1", "$2") == (
        "g.lane = ANY($1) AND g.to_lane = ANY($1) AND g.valid_at <= $2 AND g.created_at <= $2 "
        "AND (g.invalid_at IS NULL OR $2 < g.invalid_at) " + ends_kept_at
    )
    assert RULE.edge("g", "$1", "$2", include_expired=True) == (
        "g.lane = ANY($1) AND g.to_lane = ANY($1) AND g.valid_at <= $2 AND g.created_at <= $2 "
        + ends_kept_at
    )
    ends_kept = (
        "AND NOT EXISTS (SELECT 1 FROM records x_ WHERE x_.id = g.from_id "
        "AND x_.retired_at IS NOT NULL) "
        "AND NOT EXISTS (SELECT 1 FROM records x_ WHERE x_.id = g.to_id "
        "AND x_.retired_at IS NOT NULL) "
        f"AND {pending.format('g.from_id')} AND {pending.format('g.to_id')}"
    )
    assert RULE.edge("g", "$1", None).endswith(ends_kept)
    assert RULE.edge("g", "$1", None, include_expired=True).endswith(ends_kept)


def test_the_core_form_is_the_same_predicate() -> None:
    from store.reads.core_sql import compiled

    text, args = compiled(
        select(things.c.id).where(core(RULE.member("things", CORE_LANES, CORE_AT))),
        {"lanes": ["notes"], "as_of": T},
    )
    assert RULE.member("things", "CAST($1 AS text[])", "CAST($2 AS timestamptz)") in text
    assert args == [["notes"], T]


async def test_lanes_and_events(conn: Connection) -> None:
    await conn.execute(TO_HIDDEN, T0)
    notes = ["notes"]
    assert "hidden" not in await ids(conn, RULE.lane("t", "$1::text[]"), notes)
    assert "laneless" not in await ids(conn, RULE.lane("t", "$1::text[]"), notes)
    events = await ids(conn, RULE.event("t", "$1::text[]"), notes)
    assert "laneless" in events and "hidden" not in events
    # An event naming a second lane (a typed edge's to record's) needs that lane too.
    assert "to_hidden" not in events
    assert "to_hidden" in await ids(conn, RULE.event("t", "$1::text[]"), ["notes", "private"])
    assert events == await core_ids(conn, RULE.event("things", CORE_LANES), lanes=notes)
    rows = await conn.fetch("SELECT id, lane, payload FROM things")
    by_python = {
        r["id"] for r in rows if RULE.may_read_event(r["lane"], notes, json.loads(r["payload"]))
    }
    assert by_python == events
    assert RULE.chosen(["notes", "crm"], None) == ["notes", "crm"]
    assert RULE.chosen(["notes"], ["private", "notes"]) == ["notes"]


async def test_a_retired_record_is_absent_now_and_present_before(conn: Connection) -> None:
    notes = ["notes"]
    now = await ids(conn, RETIRING.record("t", "$1::text[]"), notes)
    assert "retired_before" not in now and "retired_after" not in now and "open" in now
    at_t = await ids(conn, RETIRING.record("t", "$1::text[]", "$2"), notes, T)
    assert "retired_after" in at_t and "retired_before" not in at_t
    assert at_t == await core_ids(
        conn, RETIRING.record("things", CORE_LANES, CORE_AT), lanes=notes, as_of=T
    )
    # Without the slot nothing is retired; the rule in force is the retiring one.
    unslotted = Rule(retired=None)
    assert {"retired_before", "retired_after"} <= await ids(
        conn, unslotted.record("t", "$1"), notes
    )
    assert now == await ids(conn, RULE.record("t", "$1::text[]"), notes)


async def test_an_expired_record_is_absent_from_its_instant_swept_or_not(
    conn: Connection,
) -> None:
    """A record (and its memberships) expired at T: absent now and at T, present before,
    with no tombstone written; the records row says when (`expires_at`)."""
    await conn.execute(
        "INSERT INTO records (id, lane, source_type, authority, content, properties, version, "
        "created_at, updated_at, created_by, ledger_hash, expires_at) VALUES ('sr_expiring', "
        "'notes', 'conversational', 'conversational', '', '[]', 1, $1, $1, 'dev', '', $2) "
        "ON CONFLICT DO NOTHING",
        T0,
        T,
    )
    await conn.execute("UPDATE things SET expires_at = $1 WHERE id = 'open'", T)
    await conn.execute("UPDATE things SET record_id = 'sr_expiring' WHERE id = 'later'")
    notes = ["notes"]
    now = await ids(conn, RULE.record("t", "$1::text[]"), notes)
    assert "open" not in now and "later" in now
    assert "open" in await ids(conn, RULE.record("t", "$1::text[]", "$2"), notes, BEFORE)
    assert "open" not in await ids(conn, RULE.record("t", "$1::text[]", "$2"), notes, T)
    assert "open" in await ids(conn, RULE.retired_now("t", "$1::text[]"), notes)
    # Memberships of the expired record (here: 'later') are left out now and from T.
    assert "later" not in await ids(conn, RULE.member("t", "$1::text[]", None), notes)
    assert "later" not in await ids(conn, RULE.member("t", "$1::text[]", "$2"), notes, AFTER)
    assert "later" in await ids(conn, Rule(retired=None).member("t", "$1::text[]", None), notes)
    assert "open" in await ids(conn, RULE.expired_now("t"))
    assert "sr_expiring" in {
        r["id"] for r in await conn.fetch(f"SELECT id FROM records r WHERE {RULE.expired_now('r')}")
    }


async def test_memberships_held_at_an_instant(conn: Connection) -> None:
    notes = ["notes"]
    now = await ids(conn, RULE.member("t", "$1::text[]", None), notes)
    assert now == {"open", "later", "recorded_later"}
    at_t = await ids(conn, RULE.member("t", "$1::text[]", "$2"), notes, T)
    assert at_t == {"open", "retired_after", "recorded_later"}
    assert at_t == await core_ids(
        conn, RULE.member("things", CORE_LANES, CORE_AT), lanes=notes, as_of=T
    )
    left = {
        r["id"]: r["left"]
        for r in await conn.fetch(f"SELECT id, {RULE.left_at('t', '$1')} AS left FROM things t", T)
    }
    for row in ROWS:
        assert left[row[0]] == RULE.seen_left_at(row[5], T)
    made = await ids(conn, RULE.correction("t", "$1::text[]", "$2"), notes, T)
    assert made == {"open", "retired_before", "recorded_later"}


async def test_a_typed_edge_is_visible_while_valid_and_recorded(conn: Connection) -> None:
    await conn.execute(TO_HIDDEN, T0)
    notes = ["notes"]
    at_t = await ids(conn, RULE.edge("t", "$1::text[]", "$2"), notes, T)
    # retired_before stopped being valid before T; later was not valid yet; recorded_later
    # was valid at T but not recorded by then.
    assert at_t == {"open", "retired_after"}  # not to_hidden: its other end is unreadable
    expired = await ids(conn, RULE.edge("t", "$1::text[]", "$2", include_expired=True), notes, T)
    assert expired == {"open", "retired_after", "retired_before"}
    both = await ids(conn, RULE.edge("t", "$1::text[]", "$2"), ["notes", "private"], T)
    assert both == {"open", "retired_after", "to_hidden", "hidden"}
    assert at_t == await core_ids(
        conn, RULE.edge("things", CORE_LANES, CORE_AT), lanes=notes, as_of=T
    )
    now = await ids(conn, RULE.edge("t", "$1::text[]", None), notes)
    assert now == {"open", "later", "recorded_later"}


async def retired_at_t(conn: Connection) -> None:
    """The record 'sr_gone' (in the module's own database): written at T0, retired at T."""
    await conn.execute(
        "INSERT INTO records (id, lane, source_type, authority, content, properties, version, "
        "created_at, updated_at, created_by, ledger_hash, retired_at) VALUES ('sr_gone', "
        "'notes', 'conversational', 'conversational', '', '[]', 2, $1, $2, 'dev', '', $2) "
        "ON CONFLICT DO NOTHING",
        T0,
        T,
    )
    await conn.executemany(
        "INSERT INTO ledger (kind, object_id, version, event, actor, at, policy_version, state, "
        "hash) VALUES ('record', 'sr_gone', $1, $2, 'dev', $3, 1, $4::jsonb, '') "
        "ON CONFLICT DO NOTHING",
        [(1, "sr_ingested", T0, '{"content": ""}'), (2, "sr_retired", T, '{"retired": {}}')],
    )


async def test_an_edge_to_a_retired_record_is_gone_expired_ones_shown_too(
    conn: Connection,
) -> None:
    await retired_at_t(conn)
    await conn.execute("UPDATE things SET from_id = 'sr_gone' WHERE id = 'retired_before'")
    notes = ["notes"]
    shown = RULE.edge("t", "$1::text[]", "$2", include_expired=True)
    # Retired at T: gone from a read at T and after, shown as it was before.
    assert "retired_before" not in await ids(conn, shown, notes, T)
    assert "retired_before" not in await ids(conn, shown, notes, AFTER)
    before = T - timedelta(hours=1)
    assert "retired_before" in await ids(conn, shown, notes, before)
    now = RULE.edge("t", "$1::text[]", None, include_expired=True)
    assert "retired_before" not in await ids(conn, now, notes)
    unslotted = Rule(retired=None).edge("t", "$1::text[]", None, include_expired=True)
    assert "retired_before" in await ids(conn, unslotted, notes)


async def test_an_edge_to_a_retired_record_is_gone_whatever_its_own_validity(
    conn: Connection,
) -> None:
    await retired_at_t(conn)
    # Valid for ever, and valid until after T (a retirement with a later invalidAt):
    # either way, one of its records is retired at T.
    await conn.execute("UPDATE things SET from_id = 'sr_gone' WHERE id = 'open'")
    await conn.execute("UPDATE things SET to_id = 'sr_gone' WHERE id = 'retired_after'")
    notes = ["notes"]
    before = T - timedelta(hours=1)
    for expired in (False, True):
        shown = RULE.edge("t", "$1::text[]", "$2", include_expired=expired)
        assert {"open", "retired_after"} <= await ids(conn, shown, notes, before)
        for at in (T, AFTER):
            assert not {"open", "retired_after"} & await ids(conn, shown, notes, at)
        now = RULE.edge("t", "$1::text[]", None, include_expired=expired)
        # Either end: the from record of one, the to record of the other.
        assert not {"open", "retired_after"} & await ids(conn, now, notes)
        assert await ids(conn, shown, notes, T) == await core_ids(
            conn, RULE.edge("things", CORE_LANES, CORE_AT, expired), lanes=notes, as_of=T
        )


async def test_hidden_and_engine_labels(conn: Connection) -> None:
    shown = await ids(conn, RULE.shown_label("t.label"))
    assert "retired_after" not in shown and "retired_before" in shown
    caller = await ids(conn, RULE.caller_label("t.label"))
    assert caller == {r[0] for r in ROWS if r[2] == "org"}
    props = [Property(r[2], r[0]) for r in ROWS]
    assert {p.value for p in RULE.shown(props)} == shown
    assert {p.value for p in RULE.declared(props)} == caller


# Not a caller's view: statements that read current memberships to lock or close them,
# on the write path (what the caller is told of them is `Rule.may_read`), the write
# path's closing of a record's open words and vectors intervals, and the adjustment
# label's own name, which the rule hides; and search's candidates joined to the plan of
# their lane (each row already read under the rule).
_NOT_READS = {
    "store/ids.py": 1,
    "store/kinds/record/kind.py": 1,
    "store/kinds/record/locks.py": 1,
    "store/kinds/record/search/text_hits.py": 1,
    "store/kinds/record/vectors.py": 1,
    "store/kinds/record/words.py": 1,
}
_SPELLINGS = re.compile(
    r"lane = ANY|lane\.in_|\.lane = [a-z]\.lane|lane IS NULL|lane\.is_\(None\)|lane is None or"
    r"|lane (?:not )?in readable|e_adjustment'|\"e_adjustment\"|'e_'\)|recorded_to IS NULL"
    r"|recorded_to\.is_\(None\)|recorded_from <=|recorded_to > "
    r"|if x in (?:lanes|readable)|\[\"lane\"\] in lanes"
    r"|retired_at IS|retired_at\.is|->'retired'"
)


def test_no_read_spells_the_rule_itself() -> None:
    """Every read takes its predicate from `store.reads.visibility`: a lane filter, interval
    or hidden label written anywhere else is a place the next rule would miss."""
    root = Path(__file__).parents[2]
    found: dict[str, int] = {}
    for package in ("store", "gql"):
        for path in sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            if name in ("store/reads/visibility.py", "store/tables.py") or "/migrations/" in name:
                continue
            hits = len(_SPELLINGS.findall(path.read_text()))
            if hits:
                found[name] = hits
    assert found == _NOT_READS


def test_metadata_is_no_edge_property_and_reads_as_an_object() -> None:
    held = [
        Property("org", "Acme"),
        Property("e_meta_part", "0"),
        Property("e_adjustment", "a"),
        Property("e_meta_offset", "12"),
    ]
    # Memberships are held of every label but metadata (so nothing walks or counts it).
    assert RULE.walked(held) == [held[0], held[2]]
    assert RULE.shown(held) == [held[0]]
    assert RULE.declared(held) == [held[0]]
    assert RULE.metadata(held) == {"part": "0", "offset": "12"}
