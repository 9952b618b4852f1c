"""Plans that hold whatever the statistics say.

Reads filter by lane inside the index: before ANALYZE the planner may pick any index;
when an index lacks the lane, the lane is filtered after fetching every member of the
value, so a probe on another lane's popular value costs measurably more than one on an
absent value: a timing tell.

Writes of new records scan no table that grows: PostgreSQL keeps a statement's generic
plan, made while the memory was small, until the table is next analyzed, so a scan
chosen then is paid by every write after it.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import asyncpg
import pytest

from store.kinds.record.queries import _MEMBER_COUNTS_AT
from store.kinds.record.reads.gather import GatherShape, _gather_statement
from store.pool import plain_url
from store.reads.gather_mode import GatherMode
from store.reads.visibility import RULE
from tests.conftest import GatewayFactory
from tests.gql._api import INGEST_MANY, ingest
from tests.support import Databases, plan_nodes, pool_statements, sql

PROBES = {
    "current members": (
        "SELECT record_id FROM edge_properties WHERE label = $1 "
        "AND value_key = edgeloom_value_key($2) AND lane = ANY($3::text[]) "
        "AND recorded_to IS NULL"
    ),
    "members as of": (
        "SELECT record_id FROM edge_properties WHERE label = $1 "
        "AND value_key = edgeloom_value_key($2) AND lane = ANY($3::text[]) "
        "AND recorded_from <= now() AND (recorded_to IS NULL OR recorded_to > now())"
    ),
    "records of a lane": (
        f"SELECT id FROM records WHERE {RULE.record('', '$3::text[]')} AND $1::text IS NOT NULL "
        "AND $2::text IS NOT NULL ORDER BY created_at, id LIMIT 20"
    ),
}


def index_conditions(plan: object) -> list[str]:
    """Every index condition of a JSON plan, with the index it is on."""
    return [
        f"{node['Index Name']}: {node.get('Index Cond', '')}"
        for node in plan_nodes(plan)
        if "Index Name" in node
    ]


@pytest.mark.parametrize("probe", sorted(PROBES))
async def test_the_lane_is_an_index_condition_before_any_analyze(
    databases: Databases, probe: str
) -> None:
    url = await databases.create()
    async with sql(url) as conn:
        # Another lane's popular value, with no statistics gathered yet.
        rows = [
            (f"ep_{uuid.uuid4().hex}", f"sr_{uuid.uuid4().hex}", "secret", "org", "Acme")
            for _ in range(3000)
        ]
        await conn.executemany(
            "INSERT INTO edge_properties (id, record_id, lane, label, value, recorded_from, "
            "from_version) VALUES ($1, $2, $3, $4, $5, now() - interval '1 day', 1)",
            rows,
        )
        await conn.executemany(
            "INSERT INTO records (id, lane, source_type, authority, content, properties, "
            "version, created_at, updated_at, created_by, ledger_hash) "
            "VALUES ($1, $2, 'conversational', 'conversational', '', '[]', 1, now(), now(), "
            "'dev', '')",
            [(r[1], r[2]) for r in rows],
        )
        await conn.execute("SET enable_seqscan = off")  # an index is chosen; which one is the test
        raw = await conn.fetchval(
            f"EXPLAIN (FORMAT JSON) {PROBES[probe]}", "org", "Acme", ["default"]
        )
    conditions = index_conditions(json.loads(raw))
    assert conditions, raw
    assert all("lane" in c for c in conditions), conditions


async def test_a_lane_s_page_of_records_is_read_from_its_index_alone(
    databases: Databases,
) -> None:
    """A page of `records` reads each lane's rows in (created_at, id) order from the lane
    index alone (their count is maintained: store.kinds.record.counts); an expired record
    is left out by a probe of the pending expiries, not of each row's heap tuple."""
    url = await databases.create()
    async with sql(url) as conn:
        await conn.executemany(
            "INSERT INTO records (id, lane, source_type, authority, content, properties, "
            "version, created_at, updated_at, created_by, ledger_hash) "
            "VALUES ($1, $2, 'conversational', 'conversational', $3, '[]', 1, now(), now(), "
            "'dev', '')",
            [(f"sr_{uuid.uuid4().hex}", "default", "x" * 200) for _ in range(5000)],
        )
        await conn.execute("VACUUM ANALYZE records")
        raw = await conn.fetchval(
            "EXPLAIN (FORMAT JSON) SELECT pg.* FROM unnest($1::text[]) AS l(lane) "
            "CROSS JOIN LATERAL (SELECT q.id, q.created_at FROM records q "
            f"WHERE {RULE.record_in_lane('q', 'l.lane')} "
            "ORDER BY q.created_at, q.id LIMIT 50) pg",
            ["default"],
        )
    scans = {
        n["Index Name"]: n["Node Type"] for n in plan_nodes(json.loads(raw)) if "Index Name" in n
    }
    assert scans.pop("ix_records_lane_created_at_id") == "Index Only Scan", raw
    assert set(scans) <= {"ix_records_expiring"}, raw


async def test_an_edge_s_ends_are_looked_up_among_the_retired_records_only(
    databases: Databases,
) -> None:
    """Every read of typed edges asks of each edge whether a record it joins is retired:
    of the retired records' ids (their own index), not of every record's row."""
    url = await databases.create()
    ids = [f"sr_{uuid.uuid4().hex}" for _ in range(3000)]
    gone = datetime.now(UTC)
    async with sql(url) as conn:
        await conn.executemany(
            "INSERT INTO records (id, lane, source_type, authority, content, properties, "
            "version, created_at, updated_at, created_by, ledger_hash, retired_at) "
            "VALUES ($1, 'default', 'conversational', 'conversational', '', '[]', 1, now(), "
            "now(), 'dev', '', $2)",
            [(r, gone if n % 100 == 0 else None) for n, r in enumerate(ids)],
        )
        await conn.executemany(
            "INSERT INTO edges (id, from_id, to_id, type, namespace, lane, to_lane, weight, "
            "provenance_actor, provenance_type, detector, valid_at, created_at, updated_at, "
            "version, ledger_hash) VALUES ($1, $2, $3, 'supports', 'default', 'default', "
            "'default', 1, 'dev', 'agent', 'none', now(), now(), now(), 1, '')",
            [(f"ed_{n}", ids[n], ids[-1 - n]) for n in range(1000)],
        )
        await conn.execute("VACUUM ANALYZE records")
        await conn.execute("VACUUM ANALYZE edges")
        shown = RULE.edge("g", "$1::text[]", None)
        for read in (
            f"SELECT g.id FROM edges g WHERE {shown}",
            f"SELECT count(*) FROM edges g WHERE g.from_id = ANY($1::text[]) AND {shown}",
        ):
            raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {read}", ["default"])
            nodes = plan_nodes(json.loads(raw))
            on_records = [n for n in nodes if n.get("Relation Name") == "records"]
            assert on_records, raw
            assert all(n["Node Type"] != "Seq Scan" for n in on_records), raw
            indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
            assert "ix_records_retired" in indexes and "pk_records" not in indexes, raw


GROWING = {"records", "edge_properties", "ledger", "audit_events"}


async def test_writing_new_records_plans_no_scan_of_a_growing_table_however_small(
    start_gateway: GatewayFactory, databases: Databases
) -> None:
    gateway = await start_gateway(anonymous_agent="dev")
    await ingest(gateway, "warm", ["org:Acme"])  # the policy is read, statements prepared
    async with pool_statements(gateway) as seen:
        await ingest(gateway, "one", ["org:Acme", "topic:plans"])
        inputs = [{"content": f"many {n}", "properties": ["org:Acme"]} for n in range(3)]
        await gateway.data(INGEST_MANY, {"inputs": inputs})
    written = [s for s in seen if s.query.split()[0].strip(";").upper() not in ("BEGIN", "COMMIT")]
    assert any("INSERT" in s.query for s in written), [s.query for s in written]
    # Planned as PostgreSQL plans them for good after five runs on a connection (the
    # generic plan, which the values do not change), on a memory with nothing in it yet.
    conn = await asyncpg.connect(plain_url(await databases.create()))
    try:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        for n, statement in enumerate(written):
            await conn.execute(f"PREPARE written_{n} AS {statement.query}")
            nulls = f"({', '.join(['NULL'] * len(statement.args))})" if statement.args else ""
            raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE written_{n}{nulls}")
            scanned = {
                node["Relation Name"]
                for node in plan_nodes(json.loads(raw))
                if node.get("Node Type") == "Seq Scan"
            }
            assert not scanned & GROWING, (statement.query, scanned)
    finally:
        await conn.close()


# The gateway's own membership lookups, each as a (text, values) to EXPLAIN.
def _membership_lookups(value: str) -> dict[str, tuple[str, list[object]]]:
    found: dict[str, tuple[str, list[object]]] = {}
    for mode in GatherMode:
        for at in (False, True):
            statement = _gather_statement(GatherShape(as_of=at, mode=mode, properties=2), True)
            values = {
                "label_0": "org",
                "value_0": value,
                "label_1": "org",
                "value_1": value + "b",
                "lanes": ["default"],
                "as_of": datetime.now(UTC),
                "limit": 51,
            }
            found[f"gather {mode.name}{' as of' if at else ''}"] = (
                statement.text,
                statement.args(values),
            )
    # (Current member counts read the counts the write path keeps, not the memberships.)
    found["member counts as of"] = (
        _MEMBER_COUNTS_AT,
        [["org"], [value], ["default"], datetime.now(UTC)],
    )
    return found


async def test_membership_lookups_of_a_long_value_are_index_conditions(
    databases: Databases,
) -> None:
    """Values too long for a btree row are indexed by their key; every lookup the store
    makes still finds its rows through an index on (lane, label, value_key)."""
    value = "\u6f22" * 1024  # 3 kB of UTF-8: over what a btree row holds
    url = await databases.create()
    async with sql(url) as conn:
        await conn.executemany(
            "INSERT INTO edge_properties (id, record_id, lane, label, value, recorded_from, "
            "from_version) VALUES ($1, $2, 'default', 'org', $3, now() - interval '1 day', 1)",
            [
                (f"ep_{uuid.uuid4().hex}", f"sr_{uuid.uuid4().hex}", f"{value[:-1]}{n}")
                for n in range(2000)
            ],
        )
        key = await conn.fetchval("SELECT edgeloom_value_key($1)", value)
        assert key.startswith("\x01") and len(key) == 65
        assert await conn.fetchval("SELECT edgeloom_value_key('Acme')") == "Acme"
        # Analyzed: before, a lookup of either of two values (TIMELINE) scans the label's
        # range, as it did when the index held the values themselves.
        await conn.execute("ANALYZE edge_properties")
        await conn.execute("SET enable_seqscan = off")
        for name, (text, args) in _membership_lookups(value).items():
            raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {text}", *args)
            conditions = [
                c for c in index_conditions(json.loads(raw)) if c.startswith("ix_edge_properties")
            ]
            assert conditions, (name, raw)
            assert all("value_key" in c and "lane" in c for c in conditions), (name, conditions)
