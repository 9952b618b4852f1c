"""labels reads counts the write path keeps; TIMELINE orders by when records joined the edge."""

from __future__ import annotations

from store.kinds.record.counts import fold
from store.operations.verify import verify
from store.pool import create_pool
from tests.conftest import GatewayFactory
from tests.gql._api import ADD, GATHER, INGEST_MANY, REMOVE, UPDATE, ingest, unique
from tests.support import Gateway, sql

LABELS = "query($lane: String) { labels(lane: $lane) { label recordCount } }"


async def counts(gateway: Gateway, lane: str | None = None) -> dict[str, int]:
    rows = (await gateway.data(LABELS, {"lane": lane}))["labels"]
    return {row["label"]: row["recordCount"] for row in rows}


async def test_counts_follow_every_kind_of_write_and_survive_a_fold(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(anonymous_agent="dev")
    a = (await ingest(gateway, "a", ["org:A", "org:B", "topic:x"]))["id"]
    b = (await ingest(gateway, "b", ["org:A"]))["id"]
    # Two values of one label are one record carrying it.
    assert await counts(gateway) == {"org": 2, "topic": 1}
    await gateway.data(ADD, {"id": b, "properties": ["stage:won", "org:C"]})
    assert await counts(gateway) == {"org": 2, "topic": 1, "stage": 1}
    await gateway.data(UPDATE, {"id": a, "properties": ["topic:y"]})
    await gateway.data(REMOVE, {"id": a, "labels": ["org"]})
    assert await counts(gateway) == {"org": 1, "topic": 1, "stage": 1}
    await gateway.data(REMOVE, {"id": a, "properties": ["topic:y"]})
    assert await counts(gateway) == {"org": 1, "stage": 1}
    inputs = [{"content": str(n), "properties": ["bulk:v", f"n:{n}"]} for n in range(50)]
    await gateway.data(INGEST_MANY, {"inputs": inputs})
    expected = {"org": 1, "stage": 1, "bulk": 50, "n": 50}
    assert await counts(gateway) == expected

    async with sql(gateway.database_url) as conn:
        # One delta row per label a command moved, however many records it wrote.
        assert await conn.fetchval("SELECT count(*) FROM label_deltas WHERE label = 'bulk'") == 1
        assert await conn.fetchval("SELECT count(*) FROM label_counts") == 0
    pool = await create_pool(gateway.database_url, 1)
    try:
        async with pool.acquire() as conn:
            assert await fold(conn)
    finally:
        await pool.close()
    async with sql(gateway.database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM label_deltas") == 0
        assert await conn.fetchval("SELECT records FROM label_counts WHERE label = 'bulk'") == 50
    assert await counts(gateway) == expected
    await gateway.data(REMOVE, {"id": b, "labels": ["stage"]})
    assert await counts(gateway) == {"org": 1, "bulk": 50, "n": 50}
    assert (await verify(gateway.database_url)).ok

    # A count that drifts from the ledger is reported by verify.
    async with sql(gateway.database_url) as conn:
        await conn.execute(
            "INSERT INTO label_deltas (lane, label, delta) VALUES ('default', 'org', 1)"
        )
    report = await verify(gateway.database_url)
    assert any("label 'org' in lane 'default': counted 2" in p for p in report.problems)
    async with sql(gateway.database_url) as conn:
        await conn.execute(
            "INSERT INTO label_deltas (lane, label, delta) VALUES ('default', 'org', -1)"
        )


async def test_timeline_orders_by_when_each_record_joined_the_edge(gateway: Gateway) -> None:
    tag = unique("tag:")
    first = (await ingest(gateway, "written first"))["id"]
    second = (await ingest(gateway, "written second", [tag]))["id"]
    third = (await ingest(gateway, "written third", [tag]))["id"]
    # The oldest record joins the edge last, so it comes last.
    await gateway.data(ADD, {"id": first, "properties": [tag]})
    found = await gateway.data(GATHER, {"match": [tag], "mode": "TIMELINE"})
    assert [r["id"] for r in found["gather"]["items"]] == [second, third, first]
    page = await gateway.data(GATHER, {"match": [tag], "mode": "TIMELINE", "first": 2})
    rest = await gateway.data(
        GATHER,
        {"match": [tag], "mode": "TIMELINE", "after": page["gather"]["pageInfo"]["endCursor"]},
    )
    assert [r["id"] for r in rest["gather"]["items"]] == [first]
