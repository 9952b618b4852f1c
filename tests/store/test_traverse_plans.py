"""A walk's statements are planned for what the tables hold even before PostgreSQL has
analyzed them: right after a bulk load the planner believes the new tables empty, and
every lookup a hop makes must still be an index probe by the keys it has (each value's
members by label and value key, the frontier's memberships by record id, the records
listed by primary key), never a scan of a lane or a skip scan of a wider index."""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from policies.properties import Property
from store.kinds.record.queries import _RECORDS_BY_ID
from store.kinds.record.reads.traverse import (
    READ,
    TraverseShape,
    step_record,
    walk_items,
    walk_values,
)
from store.kinds.record.resolve import RESOLVE
from store.kinds.record.traverse import (
    ALL,
    COUNT_BUDGET,
    HUB_MEMBERS,
    SOME,
    Step,
    Traversal,
    hop_statement,
)
from store.reads.compiled_sql import Compiler, Sel, record_column
from store.reads.statements import Statement
from tests.support import Databases, plan_nodes, sql

RECORDS = 4000
START = datetime(2026, 1, 1, tzinfo=UTC)
ID = Sel("id", "id", build=record_column("id"))
TABLES = ("records", "edge_properties", "member_counts", "member_deltas", "edges")


async def _load(conn: asyncpg.Connection) -> list[str]:
    """A CRM-like memory (an org of 300 with skewed weights, a topic of 60, a person of
    1,000 a record, and typed edges), loaded without any ANALYZE: autovacuum is off on
    its tables."""
    for table in TABLES:
        await conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    rng = random.Random(40)
    ids = [f"sr_{uuid.uuid4().hex}" for _ in range(RECORDS)]
    orgs = [f"org {n}" for n in range(300)]
    weights = [1 / (n + 1) for n in range(300)]
    props = [
        {
            "org": rng.choices(orgs, weights)[0],
            "topic": f"topic {rng.randrange(60)}",
            "person": f"person {rng.randrange(1000)}",
        }
        for _ in ids
    ]
    await conn.executemany(
        "INSERT INTO records (id, lane, source_type, authority, content, properties, version, "
        "created_at, updated_at, created_by, ledger_hash) VALUES ($1, 'default', 'note', "
        "'agent', 'c', $2::jsonb, 1, $3, $3, 'dev', 'h')",
        [(i, json.dumps(list(p.items())), START) for i, p in zip(ids, props, strict=True)],
    )
    await conn.executemany(
        "INSERT INTO edge_properties (id, record_id, lane, label, value, recorded_from, "
        "from_version) VALUES ($1, $2, 'default', $3, $4, $5, 1)",
        [
            (f"ep_{uuid.uuid4().hex}", i, label, value, START)
            for i, p in zip(ids, props, strict=True)
            for label, value in p.items()
        ],
    )
    # A typed edge from every tenth record to a random one (links a detector found).
    await conn.executemany(
        "INSERT INTO edges (id, from_id, to_id, type, namespace, lane, to_lane, weight, "
        "provenance_actor, provenance_type, detector, valid_at, created_at, updated_at, "
        "version, ledger_hash) VALUES ($1, $2, $3, 'links_to', 'default', 'default', "
        "'default', 1, 'dev', 'detected', 'wikilink@2', $4, $4, $4, 1, 'h')",
        [(f"edge_{uuid.uuid4().hex}", i, rng.choice(ids), START) for i in ids[::10]],
    )
    await conn.execute(
        "INSERT INTO member_counts (label, value_key, lane, value, records) "
        "SELECT label, value_key, lane, value, count(*) FROM edge_properties "
        "GROUP BY label, value_key, lane, value"
    )
    unanalyzed = await conn.fetchval(
        "SELECT bool_and(last_analyze IS NULL AND last_autoanalyze IS NULL) "
        "FROM pg_stat_user_tables WHERE relname = ANY($1::text[])",
        list(TABLES),
    )
    assert unanalyzed
    return ids


def _scans(plan: object, table: str) -> list[tuple[str, str]]:
    """Each scan of `table` in the plan: its index and index condition ("" for none)."""
    found = []
    for n in plan_nodes(plan):
        if n.get("Node Type") == "Seq Scan" and n.get("Relation Name") == table:
            found.append(("", ""))
        elif "Index Name" in n and n["Index Name"].startswith(("ix_" + table, "pk_" + table)):
            found.append((n["Index Name"], n.get("Index Cond", "")))
    return found


async def _explain(conn: asyncpg.Connection, text: str, args: list[Any]) -> object:
    return json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {text}", *args))


async def _check_plans(conn: asyncpg.Connection, ids: list[str], state: str) -> None:
    for as_of in (False, True):
        for labels in (False, True):
            params: dict[str, Any] = {
                "frontier": ids[:100],
                "lanes": ["default"],
                "hub": HUB_MEMBERS,
                "seen": ids[:101],
                "room": 100,
                "budget": COUNT_BUDGET,
                "walk": ["org", "topic", "person"],
                "as_of": START + timedelta(days=1),
                "types": None,
            }
            statement = hop_statement(as_of, SOME if labels else ALL)
            text, args = statement.text, statement.args(params)
            scans = _scans(await _explain(conn, text, args), "edge_properties")
            name = (state, "as of" if as_of else "now", "labels" if labels else "all")
            # The frontier's memberships by record id (never a skip scan of an index
            # led by the lane, nor a whole lane), and each value's members by its key.
            assert ("ix_edge_properties_record_id", "(record_id = f.id)") in scans, (name, scans)
            # Each frontier record's note (its file's sections, when it is a file's
            # record): probes by that record's id.
            notes = [s for s in scans if "record_id = o" in s[1]]
            assert notes, (name, scans)
            members = [
                s for s in scans if s[0] != "ix_edge_properties_record_id" and s not in notes
            ]
            assert members, (name, scans)
            for index, condition in members:
                assert "label = " in condition and "value_key = " in condition, (name, index)
            # The typed edges at either end of each record of the frontier's notes, by
            # that end.
            edges = {s for s in _scans(await _explain(conn, text, args), "edges")}
            assert edges == {
                ("ix_edges_from_id_type", "(from_id = n.id)"),
                ("ix_edges_to_id_type", "(to_id = n_1.id)"),
            }, (name, edges)
    # The records listed, each by primary key.
    plan = await _explain(conn, _RECORDS_BY_ID, [ids[:100], ["default"], 1 << 20])
    scans = _scans(plan, "records")
    assert [index for index, _ in scans] == ["pk_records"], (state, scans)


async def test_a_hop_probes_its_keys_before_and_after_analyze(databases: Databases) -> None:
    async with sql(await databases.create()) as conn:
        ids = await _load(conn)
        await _check_plans(conn, ids, "unanalyzed")
        await conn.execute("ANALYZE")
        await _check_plans(conn, ids, "analyzed")


def _walk_statement() -> tuple[Statement, dict[str, Any]]:
    """The compiled path's statement for `traverse { items { record { id } } }`."""
    record = Sel("record", "record", build=step_record, children=(ID,))
    items = Sel("items", "items", build=walk_items, children=(record,))
    root = Sel(
        "traverse",
        "traverse",
        site=0,
        children=(items,),
        build=lambda compiler, sel, _: READ.sql(compiler, sel, TraverseShape(as_of=False)),
    )
    return Compiler({0: TraverseShape(as_of=False)}).statement([root]), {
        "lanes": ["default"],
        "max_bytes": 1 << 20,
    }


async def test_a_walk_is_rendered_by_primary_key_before_and_after_analyze(
    databases: Databases,
) -> None:
    async with sql(await databases.create()) as conn:
        ids = await _load(conn)
        statement, values = _walk_statement()
        steps = [Step(i, 1, Property("org", "org 1")) for i in ids[:100]]
        walk_values(Traversal(steps), "s0_", values)
        for state in ("unanalyzed", "analyzed"):
            plan = await _explain(conn, statement.text, statement.args(values))
            assert {index for index, _ in _scans(plan, "records")} == {"pk_records"}, state
            # The start, resolved as the resolver resolves it: by primary key too.
            plan = await _explain(conn, RESOLVE, [ids[7], ["default"]])
            assert {index for index, _ in _scans(plan, "records")} == {"pk_records"}, state
            await conn.execute("ANALYZE")
