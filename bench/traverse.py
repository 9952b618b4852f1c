"""Traverse and labels at scale, on the store's own read functions.

    .venv/bin/python -m bench.traverse [--records 100000] [--million] [--starts 100]
                                       [--shape zipf|crm] [--no-http]

Loads Zipf records (`bench/data.py`; with `--shape crm`, the CRM shape: an org of 300
with Zipf weights, a topic of 60, a person of 5,000) through the real write path (the
executor's Ingest command, `bench/bulk.py`: 1,000 records a command, the most one takes),
connects one record in a hundred to an earlier one (Connect commands), then times
`traverse(depth 2)` from random starts (alone, followed by its records read by id, as the
gateway's ordinary path reads them, and through `edgeloom serve` over HTTP, as an agent
asks it) and `labels` (the per-label counts the write path keeps), twice: right after the
load, as an agent meets the tables once its import has answered (the write path's own
upkeep, `store.ledger.upkeep`, vacuums and analyzes in the background as in the gateway,
and may still be at it: each state prints what it had done by then; autovacuum is kept
off, so the figures do not hang on its timing), and again after ANALYZE. With --million
it loads on to 1,000,000 records and measures again. Figures go to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench import bulk
from bench.data import CrmGenerator, Generator
from bench.http import LeanCaller
from bench.measure import say
from bench.server import BenchDatabase, GatewayProcess, gateway_process
from policies.loader import DEV_POLICY_YAML
from store.database import create_engine
from store.kinds.policy.commands import ApplyPolicy
from store.kinds.policy.in_force import PolicyCache
from store.kinds.record import queries, traverse
from store.kinds.record.asserted_commands import Connect
from store.kinds.record.commands import NewRecord
from store.kinds.record.reads import labels
from store.ledger.executor import Executor
from store.operations.migrate import migrate
from store.pool import Pool, create_pool
from store.reads.statements import Statement

_TABLES = (
    "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'"
)

# The tables a hop reads, and what upkeep had done to them.
_UPKEEP = """
SELECT s.relname, s.last_vacuum IS NOT NULL, s.last_analyze IS NOT NULL,
       s.n_ins_since_vacuum, s.n_mod_since_analyze, c.relallvisible, c.relpages
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.relname IN ('records', 'edge_properties', 'member_counts') ORDER BY s.relname
"""


async def load(
    executor: Executor, gen: Generator | CrmGenerator, ids: list[str], upto: int, workers: int
) -> None:
    """Ingest until `upto` records exist, then connect one new record in a hundred."""
    rng = random.Random(len(ids))
    started, first_new = time.perf_counter(), len(ids)

    def make(n: int) -> list[NewRecord]:
        return [NewRecord(str(r["content"]), tuple(r["properties"])) for r in gen.records(n)]  # type: ignore[arg-type]

    ids.extend(await bulk.ingest(executor, make, upto - len(ids), workers))
    pairs = [
        (ids[index], ids[rng.randrange(0, index)] if index else ids[1])
        for index in range(first_new, len(ids), 100)
    ]

    async def connect(share: list[tuple[str, str]]) -> None:
        for one, other in share:
            if one != other:
                await executor.execute(bulk.AGENT, Connect(one, other, "bench"))

    await asyncio.gather(*(connect(pairs[n::workers]) for n in range(workers)))
    say(f"loaded to {len(ids):,} records in {time.perf_counter() - started:.0f}s")


async def timed(call: Callable[[], Awaitable[Any]], times: int) -> list[float]:
    took = []
    for _ in range(times):
        start = time.perf_counter()
        await call()
        took.append((time.perf_counter() - start) * 1000)
    return took


def figure(name: str, took: list[float]) -> None:
    took = sorted(took)
    p90 = took[min(len(took) - 1, int(len(took) * 0.9))]
    print(f"{name:<52} p50 {statistics.median(took):8.1f} ms   p90 {p90:8.1f} ms   n={len(took)}")


# What an agent asks over HTTP (issue: walks right after a bulk load).
WALK = """query($from: ID!) { traverse(from: $from, depth: 2, limit: 100) {
  items { hop record { id } } notShown } }"""


async def over_http(gateway: GatewayProcess, chosen: list[str], ids: list[str], when: str) -> None:
    """`traverse` through the gateway, one call at a time, and which path answered it."""
    caller = LeanCaller("127.0.0.1", gateway.port)
    queue = list(chosen)
    shown: list[int] = []

    async def one() -> None:
        data = await caller.call(WALK, {"from": queue.pop()})
        shown.append(len(data["traverse"]["items"]))

    try:
        await caller.call(WALK, {"from": chosen[0]})  # the document compiled once
        took = await timed(one, len(chosen))
    finally:
        await caller.close()
    figure(f"traverse over HTTP depth 2 limit 100, {when} ({len(ids):,})", took)
    async with httpx.AsyncClient() as client:
        metrics = (await client.get(gateway.url + "/metrics")).text
    routes = [
        line
        for line in metrics.splitlines()
        if "traverse" in line and "route=" in line and not line.startswith("#")
    ]
    print(f"  records listed per walk: median {statistics.median(shown):.0f}; {routes[:2]}")


async def upkeep_done(conn: Any) -> None:
    """What the write path's upkeep had done to the hop's tables by now."""
    for name, vacuumed, analyzed, unvacuumed, unanalyzed, visible, pages in await conn.fetch(
        _UPKEEP
    ):
        print(
            f"  {name}: {'vacuumed' if vacuumed else 'never vacuumed'}, "
            f"{'analyzed' if analyzed else 'never analyzed'}; rows inserted since "
            f"vacuum {unvacuumed:,}, changed since analyze {unanalyzed:,}; "
            f"pages all-visible {visible:,} of {pages:,}"
        )


def _hop(frontier: list[str]) -> tuple[Statement, list[Any]]:
    """The hop statement from `frontier`, and its arguments."""
    statement = traverse.hop_statement(False)
    values = {
        "frontier": frontier,
        "lanes": ["default"],
        "hub": traverse.HUB_MEMBERS,
        "seen": frontier,
        "room": 100,
        "budget": traverse.COUNT_BUDGET,
    }
    return statement, statement.args(values)


async def untouched_hop(conn: Any, frontier: list[str]) -> None:
    """A hop from records no walk has read yet, with what it read: the first read of a
    page after a bulk load may set its rows' hint bits (pages dirtied), and an index-only
    scan visits the heap until VACUUM has set the visibility map (heap fetches)."""
    statement, args = _hop(frontier)
    explain = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement.text
    found = await conn.fetchval(explain, *args)  # the store's pool decodes JSON itself
    [top] = json.loads(found) if isinstance(found, str) else found
    plan, fetches, todo = top["Plan"], 0, [top["Plan"]]
    while todo:
        node = todo.pop()
        fetches += node.get("Heap Fetches", 0)
        todo.extend(node.get("Plans", []))
    blocks = ", ".join(
        f"{what.lower()} {plan[f'Shared {what} Blocks']:,}"
        for what in ("Hit", "Read", "Dirtied", "Written")
    )
    print(
        f"  a hop from 50 records no walk has read: {top['Execution Time']:.1f} ms; "
        f"shared blocks {blocks}; heap fetches of index-only scans {fetches:,}"
    )


async def measure(
    pool: Pool, ids: list[str], starts: int, state: str, gateway: GatewayProcess | None
) -> None:
    rng = random.Random(5)
    chosen = rng.sample(ids, min(starts, len(ids)))
    starts = len(chosen)
    lanes = ["default"]
    # The store's reads take an asyncpg connection (a `Reader`), as the gateway gives them.
    print(f"-- {state}")
    async with pool.acquire() as conn:
        await upkeep_done(conn)
        await untouched_hop(conn, random.Random(len(state)).sample(ids, 50))
    # Over HTTP first, on pages the store's figures have not read yet, and again last.
    if gateway is not None:
        await over_http(gateway, chosen, ids, "first")
    async with pool.acquire() as conn:
        for limit, walk in ((100, None), (1000, None), (100, ["person", "e_connect"])):
            queue = list(chosen)
            shown: list[int] = []

            async def one(
                limit: int = limit,
                walk: list[str] | None = walk,
                queue: list[str] = queue,
                shown: list[int] = shown,
            ) -> None:
                found = await traverse.traverse(
                    conn, queue.pop(), lanes, depth=2, labels=walk, limit=limit
                )
                shown.append(len(found.steps))

            took = await timed(one, starts)
            name = f"traverse depth 2 limit {limit}" + (f" labels {walk}" if walk else "")
            figure(f"{name} ({len(ids):,})", took)
            print(f"  records listed per walk: median {statistics.median(shown):.0f}")
        queue = list(chosen)

        async def read() -> None:
            found = await traverse.traverse(conn, queue.pop(), lanes, depth=2, limit=100)
            await queries.records_by_id(conn, [s.record_id for s in found.steps], lanes)

        figure(f"traverse limit 100 + its records ({len(ids):,})", await timed(read, starts))
        figure(
            f"labels ({len(ids):,} records)",
            await timed(lambda: labels.label_counts(conn, lanes, None), 50),
        )
        unfolded = await conn.fetchval("SELECT count(*) FROM label_deltas")
        print(f"  unfolded label deltas at the time: {unfolded}")
        statement, args = _hop(chosen[:50])
        lines = [row[0] for row in await conn.fetch("EXPLAIN " + statement.text, *args)]
        scans = sorted({ln.strip().split(" on ")[0].lstrip("-> ") for ln in lines if " on " in ln})
        print(f"  hop plan scans: {scans}")
    if gateway is not None:
        await over_http(gateway, chosen, ids, "again")


async def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.traverse")
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--million", action="store_true", help="then load on to 1M and measure again")
    p.add_argument("--starts", type=int, default=100, help="traverse starts per figure")
    p.add_argument("--workers", type=int, default=2, help="concurrent Ingest commands")
    p.add_argument("--keep", action="store_true", help="keep the database")
    p.add_argument(
        "--shape", choices=("zipf", "crm"), default="zipf", help="the records' properties"
    )
    p.add_argument(
        "--no-http", action="store_true", help="leave out the walk through `edgeloom serve`"
    )
    args = p.parse_args(argv)
    db = await BenchDatabase.create()
    say(f"database: {db.where}")
    engine = create_engine(db.url, pool_size=2)
    pool = await create_pool(db.url, args.workers + 1)
    try:
        await migrate(engine)
        cache = PolicyCache.empty()
        executor = Executor(pool, cache)
        await executor.execute(bulk.AGENT, ApplyPolicy(DEV_POLICY_YAML, "bench", None, cache))
        gen = CrmGenerator() if args.shape == "crm" else Generator()
        ids: list[str] = []
        async with pool.acquire() as conn:
            tables = [r[0] for r in await conn.fetch(_TABLES)]
            for table in tables:
                await conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        async with contextlib.AsyncExitStack() as stack:
            gateway = None
            if not args.no_http:
                logs = Path(stack.enter_context(tempfile.TemporaryDirectory()))
                gateway = await stack.enter_async_context(gateway_process(db.url, logs))
            for size in [args.records, *([1_000_000] if args.million else [])]:
                await load(executor, gen, ids, size, args.workers)
                state = "right after the load (the write path's upkeep only)"
                await measure(pool, ids, args.starts, state, gateway)
                async with pool.acquire() as conn:
                    await conn.execute("ANALYZE")
                await measure(pool, ids, args.starts, "after ANALYZE", gateway)
        async with pool.acquire() as conn:
            for table in tables:
                await conn.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")
    finally:
        await pool.close()
        await engine.dispose()
        if not args.keep:
            await db.drop()


if __name__ == "__main__":
    asyncio.run(main())
