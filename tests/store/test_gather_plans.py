"""A page of one value's members reads a page of index entries a lane, however many
records carry the value: its count is the maintained one, and its records come from the
membership index in record order, each lane's first ones merged."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from store.kinds.record.reads.gather import GatherShape, _gather_statement
from tests.support import Databases, plan_nodes, sql

MEMBERS = 5000
START = datetime(2026, 1, 1, tzinfo=UTC)


async def test_a_page_of_one_value_reads_a_page_of_index_entries_a_lane(
    databases: Databases,
) -> None:
    async with sql(await databases.create()) as conn:
        rows = [
            (f"ep_{uuid.uuid4().hex}", f"sr_{uuid.uuid4().hex}", lane)
            for lane in ("default", "notes", "private")
            for _ in range(MEMBERS)
        ]
        await conn.executemany(
            "INSERT INTO edge_properties (id, record_id, lane, label, value, recorded_from, "
            f"from_version) VALUES ($1, $2, $3, 'org', 'Acme', '{START.isoformat()}', 1)",
            rows,
        )
        await conn.execute("ANALYZE edge_properties")
        readable = ["default", "notes"]
        expected = sorted(r for _, r, lane in rows if lane in readable)
        for after in (False, True):
            statement = _gather_statement(GatherShape(after=after, properties=1), False)
            values: dict[str, Any] = {
                "label_0": "org",
                "value_0": "Acme",
                "lanes": readable,
                "limit": 21,
                "after_id": expected[100],
            }
            args = statement.args(values)
            found = [r["id"] for r in await conn.fetch(statement.text, *args)]
            start = 101 if after else 0
            assert found == expected[start : start + 21]
            raw = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement.text}", *args)
            scans = [
                n
                for n in plan_nodes(json.loads(raw))
                if n.get("Relation Name") == "edge_properties"
            ]
            assert scans and all("Index" in n["Node Type"] for n in scans), scans
            # Each lane's scan stops at the page: 21 entries a loop, not 5,000.
            assert all(n["Actual Rows"] <= 21 for n in scans), [n["Actual Rows"] for n in scans]
