"""Vector search beside another lane's dense cluster: recall@10 of one lane's search
against an exact scan of that lane, and its cost, with and without the cluster beside,
for each way of indexing the vectors.

    .venv/bin/python -m bench.vectors_isolation [--records 20000] [--cluster 2000]
        [--queries 50] [--rounds 3] [--exact-records 100000]

On a fresh database (an embedded server, or DATABASE_URL's), migrated; the vectors are
written straight into the projection `record_vectors` (what a search reads), 384 numbers
each: lane `va` holds `--records` vectors near one of 100 random directions (as
`bench.vectors` draws them); the hidden lane `vb` then gets `--cluster` copies of one
vector (the same text ingested again and again), the first direction itself, after the
index is built, as writes come. Half the queries are drawn near that direction, half
near any. Each search is the store's own statement (`store.kinds.record.search`) for
`search(vector, lanes: ["va"], first: 10)`, timed on one connection.

Designs: `one index per size` (an HNSW index over every lane's vectors of the size: the
design before migration 0028), `one index per lane` (`edgeloom_vector_index(lane, size)`,
the design since), and `exact scan` (no index: every vector of the lane compared), the
last also at `--exact-records` vectors in the lane, what a lane's exact scan costs at
that size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import asyncpg

from bench.measure import Row, percentile, say, table
from bench.server import BenchDatabase
from bench.vectors import DIMS, Space
from policies.model import Embedding
from store.database import create_engine
from store.kinds.record.queries import GatherMode
from store.kinds.record.search.arguments import SearchArgs, VectorScope, bind
from store.kinds.record.search.statement import search_statement
from store.operations.migrate import migrate
from store.pool import plain_url

SCOPE = VectorScope({"va": Embedding(DIMS, "m"), "vb": Embedding(DIMS, "m")})
WRITE = """
INSERT INTO record_vectors (record_id, from_version, lane, source_type, recorded_from,
                            recorded_to, dims, embedding)
SELECT u.id, 1, $2, 'conversational', now(), NULL, $4, u.v::real[]::vector
FROM unnest($1::text[], $3::text[]) AS u(id, v)
"""
# The untyped column matches no index: the distance is computed for every vector.
EXACT = """
SELECT record_id FROM record_vectors
WHERE lane = 'va' AND dims = $2 AND recorded_to IS NULL
ORDER BY embedding <=> $1::real[]::vector, recorded_from DESC, record_id LIMIT 10
"""
SHARED = (
    "CREATE INDEX ix_record_vectors_shared ON record_vectors USING hnsw "
    f"((embedding::vector({DIMS})) vector_cosine_ops) WHERE dims = {DIMS}"
)
INDEXES = "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'ix\\_record\\_vectors\\_%'"
PGVECTOR = "SELECT count(*) > 0 FROM pg_extension WHERE extname = 'vector'"
DESIGNS = ("one index per size", "one index per lane", "exact scan")


async def write(
    conn: asyncpg.Connection, lane: str, start: int, vectors: list[list[float]]
) -> None:
    for at in range(0, len(vectors), 2000):
        part = vectors[at : at + 2000]
        ids = [f"sr_{lane}{start + at + n:030x}" for n in range(len(part))]
        texts = ["{" + ",".join(map(str, v)) + "}" for v in part]
        await conn.execute(WRITE, ids, lane, texts, DIMS)


async def index(conn: asyncpg.Connection, design: str) -> float:
    """Drop every vector index, make the design's; the seconds the build took."""
    for row in await conn.fetch(INDEXES):
        await conn.execute(f'DROP INDEX "{row["indexname"]}"')
    started = time.perf_counter()
    if design == "one index per size":
        await conn.execute(SHARED)
    elif design == "one index per lane":
        for lane in ("va", "vb"):
            await conn.execute("SELECT edgeloom_vector_index($1, $2)", lane, DIMS)
    await conn.execute("ANALYZE record_vectors")
    return time.perf_counter() - started


def statement(vector: list[float]) -> tuple[str, list[Any]]:
    args = SearchArgs(None, None, GatherMode.INTERSECT, ["va"], None, None, None, vector, SCOPE)
    values: dict[str, Any] = {"limit": 11}
    shape = bind(values, "", args)
    assert shape is not None
    st = search_statement(shape, True)
    return st.text, st.args(values)


async def searched(
    conn: asyncpg.Connection, queries: list[list[float]], rounds: int
) -> tuple[float, float]:
    """Recall@10 against the exact scan, and the p50 ms of the search (over rounds)."""
    found = []
    for q in queries:
        text, args = statement(q)
        got = [r["id"] for r in await conn.fetch(text, *args) if r["id"] is not None][:10]
        want = {r["record_id"] for r in await conn.fetch(EXACT, q, DIMS)}
        found.append(len(want & set(got)) / max(1, len(want)))
    p50s = []
    for _ in range(rounds):
        took = []
        for q in queries:
            text, args = statement(q)
            started = time.perf_counter()
            await conn.fetch(text, *args)
            took.append(time.perf_counter() - started)
        p50s.append(percentile(took, 0.5) * 1000)
    return statistics.fmean(found), statistics.median(p50s)


async def walked(conn: asyncpg.Connection, query: list[float]) -> str:
    """Which index the statement walks for `query` (EXPLAIN ANALYZE), or `no index`."""
    text, args = statement(query)
    plan = [r[0] for r in await conn.fetch("EXPLAIN (ANALYZE, COSTS off) " + text, *args)]
    used = [line.split(" using ")[1].split()[0] for line in plan if "Index Scan using" in line]
    return ", ".join(used) or "no index"


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    db = await BenchDatabase.create(args.data_dir)
    out: dict[str, Any] = {"records": args.records, "cluster": args.cluster}
    try:
        engine = create_engine(db.url, pool_size=1)
        try:
            await migrate(engine)
        finally:
            await engine.dispose()
        conn = await asyncpg.connect(plain_url(db.url))
        try:
            if not await conn.fetchval(PGVECTOR):
                say("left out: this server has no pgvector")
                return {**out, "pgvector": False}
            out["pgvector"] = True
            space = Space()
            await write(conn, "va", 0, [space.point() for _ in range(args.records)])
            await conn.execute("VACUUM ANALYZE record_vectors")
            rng = random.Random(5)
            near = [space.centres[0]] * args.cluster
            queries = [
                [c + rng.gauss(0, 0.02) for c in space.centres[0 if n % 2 else rng.randrange(100)]]
                for n in range(args.queries)
            ]
            for design in DESIGNS:
                await conn.execute("DELETE FROM record_vectors WHERE lane = 'vb'")
                out[f"build s {design}"] = await index(conn, design)
                alone = await searched(conn, queries, args.rounds)
                await write(conn, "vb", 0, near)
                beside = await searched(conn, queries, args.rounds)
                out[design] = {"alone": alone, "beside": beside}
                out[f"plan {design}"] = await walked(conn, queries[1])
                say(f"{design}: walks {out[f'plan {design}']}")
                say(
                    f"{design}: recall@10 {alone[0]:.3f} alone, {beside[0]:.3f} beside; "
                    f"p50 {alone[1]:.2f} / {beside[1]:.2f} ms"
                )
            if args.exact_records > args.records:
                await conn.execute("DELETE FROM record_vectors WHERE lane = 'vb'")
                more = args.exact_records - args.records
                await write(conn, "va", args.records, [space.point() for _ in range(more)])
                await conn.execute("VACUUM ANALYZE record_vectors")
                await index(conn, "exact scan")
                _, p50 = await searched(conn, queries[:10], args.rounds)
                out["exact p50 ms at"] = [args.exact_records, p50]
                say(f"exact scan at {args.exact_records:,}: p50 {p50:.1f} ms")
        finally:
            await conn.close()
    finally:
        await db.drop()
    return out


def rows(out: dict[str, Any]) -> list[Row]:
    if not out.get("pgvector"):
        return []
    at = f"@{out['records']:,} + {out['cluster']:,} hidden"
    lines = []
    for design in DESIGNS:
        (r_alone, p_alone), (r_beside, p_beside) = out[design]["alone"], out[design]["beside"]
        ok = r_beside >= r_alone - 0.01 if design != "exact scan" else r_beside == 1.0
        lines.append(Row(f"recall@10, {design} {at}", r_beside, r_alone, None, "= alone", ok))
        lines.append(
            Row(
                f"p50 ms, {design} {at}",
                p_beside,
                p_alone,
                p_beside / p_alone,
                "",
                None,
            )
        )
    if "exact p50 ms at" in out:
        n, p50 = out["exact p50 ms at"]
        lines.append(Row(f"p50 ms, exact scan of one lane @{n:,}", p50, None, None, "", None))
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--records", type=int, default=20_000, help="vectors of the searched lane")
    p.add_argument("--cluster", type=int, default=2_000, help="copies of one vector, hidden lane")
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--exact-records",
        type=int,
        default=100_000,
        help="the lane's size at which the exact scan is timed (0: not)",
    )
    p.add_argument("--data-dir", type=Path, help="embedded server folder (default: a temp dir)")
    p.add_argument("--json", help="write the figures to this file")
    args = p.parse_args()
    out = asyncio.run(measure(args))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    print(table(rows(out), left="beside", right="alone"))


if __name__ == "__main__":
    main()
