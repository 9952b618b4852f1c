"""Search by vector finds in a lane what that lane holds, whatever other lanes hold: a
dense cluster of another lane's vectors (one vector written two thousand times) once
captured the HNSW graph every lane of a size shared, and a search of the first lane
found nothing. Each lane's vectors now have their own index (migration 0028).

The rows are written straight into the projection (`record_vectors`) rather than through
the write path, which other tests cover: 5,000 writes would take minutes; the index and
the search are what is tested here.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest
from asyncpg import Connection

from policies.model import Embedding
from store.kinds.record.queries import GatherMode
from store.kinds.record.search.arguments import SearchArgs, VectorScope
from store.kinds.record.search.find import Hits, search
from store.kinds.record.vectors import availability
from tests.conftest import GatewayFactory
from tests.support import Gateway, sql

POLICY = """
lanes:
  va: { embedding: { dimensions: 4, model: m4 } }
  vb: { embedding: { dimensions: 4, model: m4 } }
agents:
  dev: { read: ["*"], write: ["*"] }
"""
SCOPE = VectorScope({"va": Embedding(4, "m4"), "vb": Embedding(4, "m4")})
QUERY = [0.3, 0.3, 0.3, 0.3]
WRITE = """
INSERT INTO record_vectors (record_id, from_version, lane, source_type, recorded_from,
                            recorded_to, dims, embedding)
SELECT u.id, 1, $2, 'conversational', now(), NULL, 4, u.v::real[]::vector
FROM unnest($1::text[], $3::text[]) AS u(id, v)
"""


@pytest.fixture(scope="module")
async def gateway(start_gateway: GatewayFactory) -> Gateway:
    return await start_gateway(policy_yaml=POLICY, anonymous_agent="dev")


@pytest.fixture
async def conn(gateway: Gateway) -> AsyncIterator[Connection]:
    async with sql(gateway.database_url) as connection:
        if await availability(connection) is not None:
            pytest.skip("the server has no pgvector")
        # What migration 0023 sets on the database, which a database made from the
        # suite's template does not inherit.
        for setting in ("iterative_scan = relaxed_order", "ef_search = 100"):
            await connection.execute(f"SET hnsw.{setting}")
        try:
            yield connection
        finally:
            # Rows with no ledger entry behind them: verify (at the gateway's end) would
            # report each.
            await connection.execute("DELETE FROM record_vectors")


async def write(conn: Connection, lane: str, vectors: list[list[float]]) -> None:
    ids = [f"sr_{lane}{n:030x}" for n in range(len(vectors))]
    texts = ["{" + ",".join(map(str, v)) + "}" for v in vectors]
    await conn.execute(WRITE, ids, lane, texts)


async def find(conn: Connection, lanes: list[str]) -> Hits:
    args = SearchArgs(None, None, GatherMode.INTERSECT, lanes, None, None, None, QUERY, SCOPE)
    return await search(conn, args, 100)


async def test_another_lanes_cluster_changes_nothing_a_search_of_yours_finds(
    conn: Connection,
) -> None:
    rng = random.Random(1)
    await write(conn, "va", [[rng.uniform(-1, 1) for _ in range(4)] for _ in range(3000)])
    alone = await find(conn, ["va"])
    assert len(alone.items) == 100
    # Bob's 2,000 records of one vector, the very one alice searches near.
    await write(conn, "vb", [QUERY] * 2000)
    beside = await find(conn, ["va"])
    assert [(h.id, h.score, h.vector_rank) for h in beside.items] == [
        (h.id, h.score, h.vector_rank) for h in alone.items
    ]
    # Both lanes read: each lane's nearest, merged; bob's are nearer than any of alice's.
    both = await find(conn, ["va", "vb"])
    assert len(both.items) == 100
    assert all(h.id.startswith("sr_vb") and h.score == pytest.approx(1.0) for h in both.items)
    # Each lane's graph is its own index.
    indexes = await conn.fetch(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'record_vectors' "
        "AND indexname LIKE 'ix_record_vectors_%' ORDER BY indexname"
    )
    assert [r["indexdef"].split("WHERE ")[1] for r in indexes] == [
        "((lane = 'va'::text) AND (dims = 4))",
        "((lane = 'vb'::text) AND (dims = 4))",
    ]
