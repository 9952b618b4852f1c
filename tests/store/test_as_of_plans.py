"""Reads of a past instant are index lookups that do not grow with the ledger.

A memory with a long edge history and many membership changes, analyzed, so the
planner sees the sizes: a past read of typed edges finds its edges on the projection's
indexes and each one's entry on the ledger by object id (never the whole kind's
entries written by then), and a past gather finds its members on the membership
history index and its records' versions by id.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from store.kinds.edge.queries import EdgesShape, _ego_statement, _list_statement
from store.kinds.record.queries import _RECORDS_AS_OF
from store.kinds.record.reads.gather import GatherShape, _gather_statement
from store.reads.gather_mode import GatherMode
from tests.support import Databases, plan_nodes, sql

EDGES = 2000
VERSIONS = 5
START = datetime(2026, 1, 1, tzinfo=UTC)


def _ids(n: int) -> list[str]:
    return [f"sr_{uuid.uuid4().hex}" for _ in range(n)]


async def _fill(conn: asyncpg.Connection) -> tuple[list[str], list[str]]:
    """Edges between records, each with VERSIONS ledger entries a day apart, and the
    records' memberships of one value changing over the same days."""
    records = _ids(EDGES)
    edges = [f"edge_{uuid.uuid4().hex}" for _ in range(EDGES)]
    ledger: list[tuple[Any, ...]] = []
    rows: list[tuple[Any, ...]] = []
    for n, ident in enumerate(edges):
        from_id, to_id = records[n], records[(n + 1) % EDGES]
        for v in range(1, VERSIONS + 1):
            at = START + timedelta(days=v, seconds=n)
            state = {
                "from_id": from_id,
                "to_id": to_id,
                "type": "supports",
                "namespace": "default",
                "lane": "default",
                "to_lane": "default",
                "weight": v / VERSIONS,
                "confidence": None,
                "provenance_actor": "dev",
                "provenance_type": "agent",
                "evidence": None,
                "detector": "manual@1",
                "conflict_state": None,
                "resolution": None,
                "resolver": None,
                "winner_id": None,
                "valid_at": START.isoformat(),
                "invalid_at": None,
                "expired_at": None,
                "created_at": (START + timedelta(days=1, seconds=n)).isoformat(),
            }
            ledger.append((ident, v, at, json.dumps(state), uuid.uuid4().hex))
        rows.append((ident, from_id, to_id, START + timedelta(days=VERSIONS, seconds=n)))
    await conn.executemany(
        "INSERT INTO ledger (kind, object_id, version, event, actor, at, policy_version, "
        "state, hash) VALUES ('edge', $1, $2, 'edge_upserted', 'dev', $3, 1, $4::jsonb, $5)",
        ledger,
    )
    await conn.executemany(
        "INSERT INTO edges (id, from_id, to_id, type, namespace, lane, to_lane, weight, "
        "provenance_actor, provenance_type, detector, valid_at, created_at, updated_at, "
        "version, ledger_hash) VALUES ($1, $2, $3, 'supports', 'default', 'default', "
        f"'default', 1, 'dev', 'agent', 'manual@1', $4, $4, $4, {VERSIONS}, 'h')",
        rows,
    )
    await conn.executemany(
        "INSERT INTO edge_properties (id, record_id, lane, label, value, recorded_from, "
        "recorded_to, from_version) VALUES ($1, $2, 'default', 'org', $3, $4, $5, 1)",
        [
            (
                f"ep_{uuid.uuid4().hex}",
                r,
                f"Acme {n % 50}",
                START + timedelta(days=d),
                START + timedelta(days=d + 1),
            )
            for n, r in enumerate(records)
            for d in range(VERSIONS)
        ],
    )
    await conn.execute("ANALYZE")
    return records, edges


def _scans(plan: object) -> tuple[set[str], list[str]]:
    """The tables a plan scans whole, and its index conditions (with their index)."""
    nodes = plan_nodes(plan)
    whole = {n["Relation Name"] for n in nodes if n.get("Node Type") == "Seq Scan"}
    conditions = [
        f"{n['Index Name']}: {n.get('Index Cond', '')}" for n in nodes if "Index Name" in n
    ]
    return whole, conditions


async def _explain(
    conn: asyncpg.Connection, text: str, args: list[Any]
) -> tuple[set[str], list[str]]:
    raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {text}", *args)
    return _scans(json.loads(raw))


async def test_a_past_edge_read_looks_each_edge_up_on_the_ledger_by_id(
    databases: Databases,
) -> None:
    async with sql(await databases.create()) as conn:
        records, _ = await _fill(conn)
        as_of = START + timedelta(days=3, hours=12)
        base = {"lanes": ["default"], "as_of": as_of}
        reads = {
            "edges from": (
                _list_statement(EdgesShape(as_of=True, filters=("from_id",))),
                {**base, "from_id": records[7], "limit": 51},
            ),
            "edges to (related's incoming)": (
                _list_statement(EdgesShape(as_of=True, filters=("to_id",))),
                {**base, "to_id": records[7], "limit": 51},
            ),
            "edges from with expired": (
                _list_statement(EdgesShape(as_of=True, filters=("from_id",), expired=True)),
                {**base, "from_id": records[7], "limit": 51},
            ),
            "ego both": (_ego_statement(True, "BOTH"), {**base, "nodes": records[:3]}),
            "ego out": (_ego_statement(True, "OUT"), {**base, "nodes": records[:3]}),
        }
        for name, (statement, values) in reads.items():
            whole, conditions = await _explain(conn, statement.text, statement.args(values))
            assert not whole & {"ledger", "edges"}, (name, whole)
            on_ledger = [c for c in conditions if c.startswith("uq_ledger_kind_object_id_version")]
            assert on_ledger, (name, conditions)
            assert all("object_id" in c for c in on_ledger), (name, on_ledger)
            on_edges = [c for c in conditions if c.startswith("ix_edges_")]
            assert on_edges, (name, conditions)
        # And the answer is the state as it was: the third of five versions.
        statement, values = reads["edges from"]
        rows = await conn.fetch(statement.text, *statement.args(values))
        assert [(r["total"], r["version"], r["weight"]) for r in rows] == [(1, 3, 3 / VERSIONS)]


async def test_a_past_gather_is_served_by_the_membership_history_index(
    databases: Databases,
) -> None:
    async with sql(await databases.create()) as conn:
        records, _ = await _fill(conn)
        as_of = START + timedelta(days=2, hours=12)
        for mode in GatherMode:
            for count in (1, 2):
                statement = _gather_statement(
                    GatherShape(as_of=True, mode=mode, properties=count), True
                )
                values = {
                    "label_0": "org",
                    "value_0": "Acme 7",
                    "label_1": "org",
                    "value_1": "Acme 8",
                    "lanes": ["default"],
                    "as_of": as_of,
                    "limit": 51,
                }
                name = f"{mode.name} of {count}"
                whole, conditions = await _explain(conn, statement.text, statement.args(values))
                assert "edge_properties" not in whole, (name, whole)
                used = [c for c in conditions if c.startswith("ix_edge_properties")]
                assert used, (name, conditions)
                assert all("value_key" in c and "lane" in c for c in used), (name, used)
        # The page's records as they were then: their versions found by id.
        whole, conditions = await _explain(
            conn, _RECORDS_AS_OF, [records[:50], ["default"], as_of, 1 << 20]
        )
        assert "ledger" not in whole, whole
        assert any(c.startswith("uq_ledger_kind_object_id_version") for c in conditions)
