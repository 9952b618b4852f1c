"""The counts the write path keeps equal a direct count of the rows, for every reader.

A mixed workload (single and batch ingests, updates that replace values, removals,
connections and a group, a fold half way, a policy change that narrows a reader's
lanes) is read by each agent through both read paths (the compiled one and
strawberry's), and every maintained count is compared with a COUNT over the live
tables restricted to the agent's readable lanes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from policies.properties import Property
from store.kinds.policy.in_force import READ_TTL_SECONDS
from store.kinds.record import queries
from store.kinds.record.counts import fold
from store.kinds.record.reads import gather as gather_read
from store.kinds.record.reads import records as records_read
from store.operations.verify import verify
from store.pool import create_pool
from store.reads.gather_mode import GatherMode
from store.reads.lane_floor import Lanes
from store.reads.snapshot import Snapshot
from tests.conftest import GatewayFactory
from tests.gql._api import RESTORE_RECORD, RETIRE_RECORD
from tests.gql._asserted import CONNECT, GROUP
from tests.gql._policy_support import ADD, APPLY, INGEST, INGEST_MANY, REMOVE, UPDATE, mint
from tests.support import Gateway, sql

POLICY = """
lanes:
  a: {}
  b: {}
  c:
    source_types:
      note: { authority: documentary, allowed_labels: [org, topic] }
      memo: { authority: documentary, allowed_labels: [org, topic] }
agents:
  wide: { read: [a, b, c], write: [a, b, c] }
  narrow: { read: [a], write: [a] }
  curator: { read: ["*"], write: ["*"], apply_policy: true }
"""
# wide no longer reads b.
NARROWED = POLICY.replace("wide: { read: [a, b, c]", "wide: { read: [a, c]")
READS = {"wide": ["a", "b", "c"], "narrow": ["a"], "curator": ["a", "b", "c"]}

COUNTS = """
query($p: String!, $lane: String, $type: String) {
  all: records { totalCount }
  inLane: records(lane: $lane) { totalCount }
  ofType: records(sourceType: $type) { totalCount }
  page: records(first: 1) { totalCount items { id } }
  gathered: gather(match: [$p]) { totalCount }
  either: gather(match: [$p], mode: UNION) { totalCount }
  edge: edgeProperty(property: $p) { memberCount members(first: 1) { totalCount } }
  labels { label recordCount }
}
"""
PROPERTIES = ["org:Acme", "org:Beta", "topic:x", "topic:y", "topic:z", "n:3", "org:none"]


async def direct(url: str, lanes: list[str], prop: str, lane: str, kind: str) -> dict[str, Any]:
    """The same counts, each a COUNT over the live rows."""
    label, value = prop.split(":", 1)
    async with sql(url) as conn:
        records = "SELECT count(*) FROM records WHERE retired_at IS NULL AND lane = ANY($1::text[])"
        members = await conn.fetchval(
            "SELECT count(DISTINCT record_id) FROM edge_properties WHERE label = $1 "
            "AND value = $2 AND recorded_to IS NULL AND lane = ANY($3::text[])",
            label,
            value,
            lanes,
        )
        labels = await conn.fetch(
            "SELECT label, count(DISTINCT record_id) AS n FROM edge_properties "
            "WHERE recorded_to IS NULL AND lane = ANY($1::text[]) AND left(label, 2) <> 'e_' "
            "GROUP BY label",
            lanes,
        )
        return {
            "all": await conn.fetchval(records, lanes),
            "inLane": await conn.fetchval(records, [lane] if lane in lanes else []),
            "ofType": await conn.fetchval(records + " AND source_type = $2", lanes, kind),
            "members": members,
            "labels": {r["label"]: r["n"] for r in labels},
        }


async def check(gateway: Gateway, tokens: dict[str, str], reads: dict[str, list[str]]) -> None:
    for agent, lanes in reads.items():
        for n, prop in enumerate(PROPERTIES):
            lane, kind = "abc"[n % 3], ("note", "memo")[n % 2]
            variables = {"p": prop, "lane": lane, "type": kind}
            got = await gateway.data(COUNTS, variables, tokens[agent])
            want = await direct(gateway.database_url, lanes, prop, lane, kind)
            where = (agent, prop)
            assert got["all"]["totalCount"] == want["all"], where
            assert got["page"]["totalCount"] == want["all"], where
            assert got["inLane"]["totalCount"] == want["inLane"], (where, lane)
            assert got["ofType"]["totalCount"] == want["ofType"], (where, kind)
            assert got["gathered"]["totalCount"] == want["members"], where
            assert got["either"]["totalCount"] == want["members"], where
            if want["members"]:
                assert got["edge"]["memberCount"] == want["members"], where
                assert got["edge"]["members"]["totalCount"] == want["members"], where
            else:
                assert got["edge"] is None, where
            labels = {row["label"]: row["recordCount"] for row in got["labels"]}
            assert labels == want["labels"], where


async def folded(url: str) -> None:
    pool = await create_pool(url, 1)
    try:
        async with pool.acquire() as conn:
            assert await fold(conn)
    finally:
        await pool.close()


async def test_every_maintained_count_equals_a_direct_count_after_a_mixed_workload(
    start_gateway: GatewayFactory,
) -> None:
    compiled = await start_gateway(POLICY)
    plain = await start_gateway(POLICY, database_url=compiled.database_url, compiled_path=False)
    tokens = await mint(compiled, "wide", "narrow", "curator")
    wide = tokens["wide"]

    async def ingest(lane: str, props: list[str], **fields: Any) -> str:
        given = {"content": f"in {lane}", "lane": lane, "properties": props, **fields}
        made = await compiled.data(INGEST, {"input": given}, wide)
        return str(made["ingest"]["id"])

    r1 = await ingest("a", ["org:Acme", "topic:x"])
    r2 = await ingest("a", ["org:Acme"])
    r3 = await ingest("a", ["org:Beta", "topic:x"])
    r4 = await ingest("b", ["org:Acme", "topic:y"])
    batch = [
        {"content": f"b{n}", "lane": "b", "properties": ["org:Acme", f"n:{n}"]} for n in range(20)
    ]
    await compiled.data(INGEST_MANY, {"inputs": batch}, wide)
    r5 = await ingest("c", ["org:Acme"], sourceType="note")
    await ingest("c", ["topic:x"], sourceType="memo")
    await compiled.data(UPDATE, {"id": r1, "properties": ["org:Beta"]}, wide)
    await compiled.data(REMOVE, {"id": r2, "labels": ["org"]}, wide)
    await compiled.data(REMOVE, {"id": r3, "properties": ["topic:x"]}, wide)
    await compiled.data(CONNECT, {"a": r1, "b": r4, "hint": "knows"}, wide)
    team = (await compiled.data(GROUP, {"ids": [r1, r3, r5], "hint": "team"}, wide))["group"]
    await folded(compiled.database_url)
    # After the fold, unfolded deltas again: counts are folded counts plus deltas.
    await compiled.data(UPDATE, {"id": r4, "properties": ["topic:z"]}, wide)
    await compiled.data(ADD, {"id": r2, "properties": ["org:Acme", "n:3"]}, wide)
    await ingest("a", ["org:Acme"])
    # Retired records leave every count; a restored one comes back.
    gone = await ingest("b", ["org:Acme", "topic:y"])
    back = await ingest("a", ["org:Beta"])
    for retired in (gone, back):
        await compiled.data(RETIRE_RECORD, {"id": retired, "reason": "wrong"}, wide)
    await compiled.data(RESTORE_RECORD, {"id": back}, wide)
    async with sql(compiled.database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM member_deltas") > 0
        assert await conn.fetchval("SELECT count(*) FROM member_counts") > 0

    for gateway in (compiled, plain):
        await check(gateway, tokens, READS)
        # The group's value is a hyperedge too, counted the same way.
        found = await gateway.data(
            "query($p: String!) { edgeProperty(property: $p) { memberCount } }",
            {"p": team["id"]},
            tokens["narrow"],
        )
        assert found["edgeProperty"]["memberCount"] == 2  # r1 and r3 in a; r5 is in c

    await compiled.data(APPLY, {"yaml": NARROWED}, tokens["curator"])
    # The other gateway reads a new policy within its cache's second (docs/policy.md).
    await asyncio.sleep(READ_TTL_SECONDS)
    for gateway in (compiled, plain):
        await check(gateway, tokens, {**READS, "wide": ["a", "c"]})
    assert (await verify(compiled.database_url)).ok


async def test_verify_reports_a_tampered_maintained_count(start_gateway: GatewayFactory) -> None:
    gateway = await start_gateway(anonymous_agent="dev")
    made = await gateway.data(INGEST, {"input": {"content": "x", "properties": ["org:Acme"]}})
    assert made["ingest"]["id"]
    await folded(gateway.database_url)
    assert (await verify(gateway.database_url)).ok
    async with sql(gateway.database_url) as conn:
        await conn.execute("UPDATE member_counts SET records = records + 2 WHERE label = 'org'")
        await conn.execute(
            "INSERT INTO record_deltas (lane, source_type, delta) "
            "VALUES ('default', 'conversational', -1)"
        )
    problems = (await verify(gateway.database_url)).problems
    assert "value 'org:Acme' in lane 'default': counted 3 members, the ledger has 1" in problems
    assert (
        "records of source type 'conversational' in lane 'default': counted 0, the ledger has 1"
        in problems
    )
    async with sql(gateway.database_url) as conn:
        await conn.execute("UPDATE member_counts SET records = records - 2 WHERE label = 'org'")
        await conn.execute(
            "INSERT INTO record_deltas (lane, source_type, delta) "
            "VALUES ('default', 'conversational', 1)"
        )
    assert (await verify(gateway.database_url)).ok


async def test_counts_read_in_a_snapshot_equal_a_count_in_it_under_concurrent_writers(
    start_gateway: GatewayFactory,
) -> None:
    """Writers add, move and drop members of one value while folds run beside them;
    each read snapshot's maintained counts equal COUNTs taken in that snapshot."""
    gateway = await start_gateway(anonymous_agent="dev")
    url, lanes, hot = gateway.database_url, ["default"], Property("org", "Hot")
    stop = asyncio.Event()
    writes = 0

    async def writer(n: int) -> None:
        nonlocal writes
        while not stop.is_set():
            batch = [{"content": f"w{n}", "properties": ["org:Hot", f"w:{n}"]} for _ in range(5)]
            made = (await gateway.data(INGEST_MANY, {"inputs": batch}))["ingestMany"]
            await gateway.data(UPDATE, {"id": made[0]["id"], "properties": ["org:Cold"]})
            await gateway.data(REMOVE, {"id": made[1]["id"], "labels": ["org"]})
            writes += 1

    pool = await create_pool(url, 3)

    async def folder() -> None:
        while not stop.is_set():
            async with pool.acquire() as conn:
                await fold(conn)
            await asyncio.sleep(0.01)

    async def readable() -> Lanes:
        return Lanes.of(lanes)

    tasks = [asyncio.create_task(writer(n)) for n in range(3)] + [asyncio.create_task(folder())]
    seen: set[int] = set()
    try:
        for _ in range(40):
            snapshot = Snapshot(pool, lanes=readable)
            try:
                page = await records_read.browse(snapshot, lanes, None, 1, None)
                gathered = await gather_read.gather(
                    snapshot, [str(hot)], GatherMode.UNION, lanes, None, 1, None
                )
                members = (await queries.member_counts(snapshot, [hot], lanes, None))[hot]
                records = await snapshot.fetchval("SELECT count(*) FROM records")
                carrying = await snapshot.fetchval(
                    "SELECT count(*) FROM edge_properties WHERE label = 'org' "
                    "AND value = 'Hot' AND recorded_to IS NULL"
                )
            finally:
                await snapshot.close()
            assert page.total_count == records
            assert gathered.total_count == members == carrying
            seen.add(records)
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await pool.close()
    # The reads saw the memory move, not one still moment.
    assert writes > 0 and len(seen) > 3
    assert (await verify(url)).ok
