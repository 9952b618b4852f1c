"""The lanes' policies leave the gateway's plans as they were (migration 0033).

A policy that PostgreSQL can fold into an index condition beside the gateway's own
`lane = ANY($n)` makes a plan kept across calls look several times dearer (two arrays
the planner cannot see, each costed as ten probes of the index), so the plan cache
plans the statement afresh at every call. The policy must be a filter on the rows the
gateway's conditions found: the generic plan of a member lookup costs, under the
policy, what it costs without."""

from __future__ import annotations

import json
import re
import uuid

import asyncpg

from tests.support import Databases, sql

# gather's member lookup: a value's current members in the caller's lanes.
LOOKUP = (
    "SELECT record_id FROM edge_properties WHERE lane = ANY($1::text[]) AND label = $2 "
    "AND value_key = $3 AND recorded_to IS NULL"
)


async def _generic_cost(conn: asyncpg.Connection) -> tuple[float, str]:
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    await conn.execute(f"PREPARE lookup AS {LOOKUP}")
    try:
        found = await conn.fetchval(
            "EXPLAIN (FORMAT JSON) EXECUTE lookup('{default}'::text[], 'org', 'org 1')"
        )
    finally:
        await conn.execute("DEALLOCATE lookup")
        await conn.execute("RESET plan_cache_mode")
    plan = json.loads(found)[0]["Plan"]
    return float(plan["Total Cost"]), json.dumps(plan)


async def test_a_lookup_costs_the_same_under_the_policy(databases: Databases) -> None:
    role = f"plan_reader_{uuid.uuid4().hex[:8]}"
    async with sql(await databases.create()) as conn:
        await conn.execute(
            "INSERT INTO records (id, lane, source_type, authority, content, properties, version, "
            "created_at, updated_at, created_by, ledger_hash) SELECT 'sr_' || n, "
            "'default', 'note', 'agent', 'c', '[]', 1, now(), now(), 'dev', 'h' "
            "FROM generate_series(1, 2000) n"
        )
        await conn.execute(
            "INSERT INTO edge_properties (id, record_id, lane, label, value, recorded_from, "
            "from_version) SELECT 'ep_' || n, 'sr_' || n, 'default', 'org', 'org ' || (n % 300), "
            "now(), 1 FROM generate_series(1, 2000) n"
        )
        await conn.execute("ANALYZE edge_properties")
        await conn.execute(f"CREATE ROLE {role} NOLOGIN")
        try:
            await conn.execute(f"GRANT SELECT ON edge_properties TO {role}")
            without, _ = await _generic_cost(conn)  # a superuser: no policy applies
            await conn.execute(f"SET ROLE {role}")
            await conn.execute("SELECT set_config('edgeloom.read_lanes', 'default', false)")
            under, plan = await _generic_cost(conn)
            await conn.execute("RESET ROLE")
            await conn.execute(f"REVOKE ALL ON edge_properties FROM {role}")
        finally:
            await conn.execute("RESET ROLE")
            await conn.execute(f"DROP ROLE {role}")
    conditions = [c for c in re.findall(r'"Index Cond": "([^"]*)"', plan)]
    assert conditions and all(c.count("lane = ANY") == 1 for c in conditions), plan
    assert under <= without * 1.1, (without, under, plan)
    assert "array_position" in plan  # the policy applied, as a filter
