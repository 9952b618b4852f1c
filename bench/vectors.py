"""Vector search rows: `search(vector)` on 384-dimension vectors, its recall@10 against an
exact scan, with and without a `match` filter, hybrid, and as of an instant against now.

    .venv/bin/python -m bench.vectors [--records 100000] [--queries 50] [--rounds 3]

A development gateway (`edgeloom serve`) on a fresh embedded database; the bench applies a
policy declaring the lane's embedding (384 dimensions) and writes `--records` records
through the store's Ingest command (`bench/bulk.py`, the write path `ingestMany` runs),
each with a vector drawn near one of 100 random directions (so that neighbours mean
something, as a model's do: uniform random vectors have none), a `slice` property of 100
values (a filter keeping 1%) and a `band` of 10 (10%). The HNSW
index is built after the load (the lane's `edgeloom_vector_index`, as a gateway's start builds it).
Recall@10 of each query is the share of its 10 exact nearest (an exact scan: the distance
computed for every candidate, no index) the search returns in its first 10.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from bench import bulk
from bench.data import Generator, word
from bench.http import LeanCaller
from bench.measure import Row, latencies, percentile, say, table
from bench.server import BenchDatabase, gateway_process
from policies.model import Embedding
from store.kinds.record import embedding
from store.kinds.record.commands import NewRecord
from store.kinds.record.queries import GatherMode
from store.kinds.record.search.arguments import SearchArgs, VectorScope, bind
from store.kinds.record.search.planner import plan_search
from store.kinds.record.search.statement import search_statement
from store.pool import plain_url

DIMS = 384
TARGET_RECALL = 0.95
TARGET_AS_OF = 2.0
CENTRES = 100
SLICES, BANDS = 100, 10
BATCH = 250
POLICY = f"""
lanes:
  default: {{ embedding: {{ dimensions: {DIMS}, model: bench-clustered }} }}
agents:
  dev: {{ read: ["*"], write: ["*"], apply_policy: true }}
"""
APPLY = "mutation($yaml: String!) { applyPolicy(yaml: $yaml) { version } }"
SEARCH = """query($vector: [Float!], $text: String, $match: [String!], $asOf: DateTime,
    $first: Int) {
  search(vector: $vector, text: $text, match: $match, asOf: $asOf, first: $first) {
    totalCount items { score textRank vectorRank record { id } } } }"""
# The exact nearest: the distance for every candidate (the untyped column matches no index).
EXACT = """
SELECT v.record_id FROM record_vectors v {join}
WHERE v.dims = {dims} AND v.recorded_to IS NULL
ORDER BY v.embedding <=> $1::real[]::vector, v.recorded_from DESC, v.record_id LIMIT 10
"""
PGVECTOR = "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
MEMBERS = (
    "JOIN edge_properties m ON m.record_id = v.record_id AND m.recorded_to IS NULL "
    "AND m.label = $2 AND m.value = $3"
)


class Space:
    """Vectors near one of CENTRES random directions, deterministic for a seed."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.centres = [
            self._unit([self.rng.gauss(0, 1) for _ in range(DIMS)]) for _ in range(CENTRES)
        ]

    @staticmethod
    def _unit(v: list[float]) -> list[float]:
        n = math.sqrt(sum(x * x for x in v))
        return [x / n for x in v]

    def point(self) -> list[float]:
        centre = self.rng.choice(self.centres)
        spread = 1.0 / math.sqrt(DIMS)
        return [round(c + self.rng.gauss(0, spread), 4) for c in centre]


async def load(url: str, records: int, space: Space, clients: int) -> float:
    """Write `records` records with their vectors through the store's Ingest command
    (`bench/bulk.py`): the write path, without GraphQL's coercion of 384 floats a record."""
    gen = Generator()

    def make(n: int) -> list[NewRecord]:
        batch, first = [], gen.count + 1  # the number in the first record's content
        for k, record in enumerate(gen.records(n), first):
            properties = (f"slice:s{k % SLICES:02d}", f"band:b{k % BANDS}")
            vector = embedding.pack(space.point())
            batch.append(NewRecord(str(record["content"]), properties, embedding=vector))
        return batch

    started = time.perf_counter()
    async with bulk.executor(url, clients) as executor:
        await bulk.ingest(executor, make, records, clients, f"loading {records:,}")
    return time.perf_counter() - started


async def recall(
    conn: asyncpg.Connection, caller: LeanCaller, queries: list[dict[str, Any]]
) -> float:
    found = []
    for q in queries:
        got = (await caller.call(SEARCH, {**q, "first": 10}))["search"]["items"]
        ids = [i["record"]["id"] for i in got]
        if q.get("match"):
            label, value = q["match"][0].split(":", 1)
            sql = EXACT.format(join=MEMBERS, dims=DIMS)
            exact = await conn.fetch(sql, q["vector"], label, value)
        else:
            exact = await conn.fetch(EXACT.format(join="", dims=DIMS), q["vector"])
        want = {r["record_id"] for r in exact}
        if not found:
            say(f"  first query of the case: {len(ids)} hits, {len(want)} exact nearest")
        found.append(len(want & set(ids)) / max(1, len(want)))
    return statistics.fmean(found)


async def plan(conn: asyncpg.Connection, asked: dict[str, Any]) -> str:
    """How the store's statement for `asked` finds its vectors: the index walked, or the
    exact scan (the branch whose one-time filter held)."""
    scope = VectorScope({"default": Embedding(DIMS, "bench-clustered")})
    args = SearchArgs(
        None,
        asked.get("match"),
        GatherMode.INTERSECT,
        ["default"],
        None,
        None,
        None,
        asked["vector"],
        scope,
    )
    values: dict[str, Any] = {"limit": 11}
    shape = bind(values, "", args)
    assert shape is not None
    # The planner decides, as for the gateway, whether the vectors of `match` are compared.
    await plan_search(conn, values, "")
    statement = search_statement(shape, True)
    rows = await conn.fetch(
        "EXPLAIN (ANALYZE, COSTS off, TIMING off) " + statement.text, *statement.args(values)
    )
    lines = [r[0] for r in rows]
    walked = any("ix_record_vectors_" in line and "never executed" not in line for line in lines)
    return "HNSW index walked" if walked else "exact scan"


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The vector figures on a database of their own; `{"pgvector": False}` and no figures
    where the server has no pgvector (the gateway refuses vectors there)."""
    db = await BenchDatabase.create(args.data_dir)
    log_dir = Path(tempfile.mkdtemp(prefix="edgeloom-bench-logs-"))
    out: dict[str, Any] = {"records": args.records, "pgvector": True}
    try:
        conn = await asyncpg.connect(plain_url(db.url))
        try:
            out["pgvector"] = bool(await conn.fetchval(PGVECTOR))
        finally:
            await conn.close()
        if not out["pgvector"]:
            say("vector rows left out: this server has no pgvector")
            return out
        async with gateway_process(db.url, log_dir) as gateway:
            caller = LeanCaller("127.0.0.1", gateway.port)
            await caller.call(APPLY, {"yaml": POLICY})
            conn = await asyncpg.connect(plain_url(db.url))
            try:
                await conn.execute(f"DROP INDEX IF EXISTS ix_record_vectors_{DIMS}_default")
                space = Space()
                seconds = await load(db.url, args.records, space, args.clients)
                out["load_records_per_s"] = args.records / seconds
                say(f"loaded {args.records:,} in {seconds:.0f}s")
                t0 = time.perf_counter()
                await conn.execute("VACUUM (ANALYZE) record_vectors")
                await conn.execute("VACUUM (ANALYZE) edge_properties")
                await conn.execute(f"SELECT edgeloom_vector_index('default', {DIMS})")
                out["index_build_s"] = time.perf_counter() - t0
                say(f"HNSW index built in {out['index_build_s']:.0f}s")
                out.update(await workloads(args, conn, caller, space))
            finally:
                await conn.close()
                await caller.close()
    finally:
        await db.drop()
        shutil.rmtree(log_dir, ignore_errors=True)
    return out


async def workloads(
    args: argparse.Namespace, conn: asyncpg.Connection, caller: LeanCaller, space: Space
) -> dict[str, Any]:
    rng = random.Random(3)
    vectors = [space.point() for _ in range(args.queries)]
    now = datetime.now(UTC).isoformat()
    cases: dict[str, list[dict[str, Any]]] = {
        "vector": [{"vector": v} for v in vectors],
        "vector, match 1%": [
            {"vector": v, "match": [f"slice:s{rng.randrange(SLICES):02d}"]} for v in vectors
        ],
        "vector, match 10%": [
            {"vector": v, "match": [f"band:b{rng.randrange(BANDS)}"]} for v in vectors
        ],
        "hybrid": [{"vector": v, "text": word(50)} for v in vectors],
        "vector asOf": [{"vector": v, "asOf": now} for v in vectors],
    }
    out: dict[str, Any] = {}
    for name in ("vector", "vector, match 1%", "vector, match 10%"):
        out[f"recall {name}"] = await recall(conn, caller, cases[name])
        say(f"recall@10 {name}: {out[f'recall {name}']:.3f}")
        out[f"plan {name}"] = await plan(conn, cases[name][0])
        say(f"  plan: {out[f'plan {name}']}")
    rounds: dict[str, list[float]] = {name: [] for name in cases}
    for n in range(args.rounds):
        order = list(cases) if n % 2 == 0 else list(reversed(cases))
        for name in order:
            took = await latencies(cases[name], lambda v: caller.call(SEARCH, {**v, "first": 10}))
            rounds[name].append(percentile(took, 0.5) * 1000)
            say(f"  round {n + 1} {name}: p50 {rounds[name][-1]:.2f} ms")
    for name, p50s in rounds.items():
        out[f"p50 ms {name}"] = p50s
    return out


def rows(out: dict[str, Any]) -> list[Row]:
    """The figures as `bench.run`'s rows: the gateway column holds each figure, the raw
    column what it is compared with (asOf against now), where there is one."""
    if not out.get("pgvector"):
        return []
    at = f"@{out['records']:,}"
    lines = []
    for name in ("vector", "vector, match 1%", "vector, match 10%"):
        recall = out[f"recall {name}"]
        lines.append(
            Row(
                f"search({name}) {DIMS}-dim recall@10 {at}",
                recall,
                None,
                None,
                ">=0.95",
                recall >= TARGET_RECALL,
            )
        )
        p50 = statistics.median(out[f"p50 ms {name}"])
        lines.append(
            Row(f"search({name}) p50 ms, {out[f'plan {name}']} {at}", p50, None, None, "", None)
        )
    hybrid = statistics.median(out["p50 ms hybrid"])
    lines.append(Row(f"search(hybrid) p50 ms {at}", hybrid, None, None, "", None))
    now, past = (
        statistics.median(out["p50 ms vector"]),
        statistics.median(out["p50 ms vector asOf"]),
    )
    lines.append(
        Row(
            f"search(vector) asOf p50 ms (vs now) {at}",
            past,
            now,
            past / now,
            f"<={TARGET_AS_OF}",
            past / now <= TARGET_AS_OF,
        )
    )
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=50, help="queries per workload and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--clients", type=int, default=4, help="Ingest commands in flight when loading")
    p.add_argument("--data-dir", type=Path, help="embedded server folder (default: a temp dir)")
    p.add_argument("--json", help="write the figures to this file")
    args = p.parse_args()
    out = asyncio.run(measure(args))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    print(table(rows(out)))


if __name__ == "__main__":
    main()
