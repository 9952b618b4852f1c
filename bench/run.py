"""edgeloom benchmark: the real gateway against raw asyncpg running the identical SQL.

    .venv/bin/python -m bench.run [--records 100000] [--million] [--clients 16]
                                  [--duration 15] [--rounds 3] [--json out.json]

See bench/README.md for what each figure means and how to read it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import edges, peer, phases, search, vectors
from bench.capture import capture_gateway
from bench.measure import Row, median, say, table
from bench.phases import Bench
from bench.raw import open_pool
from bench.server import BenchDatabase, gateway_process, plain_url

TARGET_INGEST = 0.6
TARGET_MANY = 0.8
TARGET_GATHER = 1.3
TARGET_SCALE = 2.0
TARGET_FLAT = 1.5
TARGET_AS_OF = 2.0
TARGET_SEARCH = 1.3
# Each vector query is also answered by an exact scan (its recall): fewer than the gathers'.
VECTOR_QUERIES = 50


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=100_000, help="records to load (default 100k)")
    p.add_argument(
        "--million",
        action="store_true",
        help="measure at --records, then load on to 1,000,000 and measure again",
    )
    p.add_argument("--clients", type=int, default=16, help="concurrent single-ingest clients")
    p.add_argument("--many-clients", type=int, default=4, help="concurrent ingestMany callers")
    p.add_argument(
        "--load-clients", type=int, default=4, help="Ingest commands in flight when loading"
    )
    p.add_argument("--duration", type=float, default=15.0, help="seconds per throughput round")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per figure")
    p.add_argument("--queries", type=int, default=200, help="gather queries per round")
    p.add_argument("--page", type=int, default=20, help="gather page size (first)")
    p.add_argument(
        "--edges", type=int, default=edges.EDGES, help="typed edges to load (at most one a record)"
    )
    p.add_argument(
        "--client",
        choices=["lean", "httpx"],
        default="lean",
        help="HTTP client (see bench/README.md)",
    )
    p.add_argument(
        "--gateways", type=int, default=1, help="gateway processes (replicas) to spread calls over"
    )
    p.add_argument("--raw-pool", type=int, default=16, help="raw asyncpg pool size")
    p.add_argument("--json", help="write every figure, round and plan to this file")
    p.add_argument("--data-dir", type=Path, help="embedded server folder (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the bench database at the end")
    p.add_argument("--skip-writes", action="store_true", help="measure reads only")
    p.add_argument(
        "--skip-peer", action="store_true", help="leave out the comparison with PostGraphile"
    )
    p.add_argument(
        "--peer-workers",
        type=int,
        default=2,
        help="also measure `edgeloom serve --workers N` against PostGraphile (0: only N=1)",
    )
    p.add_argument(
        "--vectors",
        type=int,
        help="records of the vector rows, on a database of their own after the stages "
        "(default: --records; 0 leaves them out)",
    )
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args(argv)
    if args.million and args.records >= 1_000_000:
        p.error("--million measures at --records and then at 1,000,000; --records must be less")
    return args


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [args.records] + ([1_000_000] if args.million else [])
    results: dict[str, Any] = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loop": type(asyncio.get_running_loop()).__module__,
        },
        "stages": [],
    }
    db = await BenchDatabase.create(args.data_dir)
    say(f"bench database: {db.where}")
    log_dir = Path(tempfile.mkdtemp(prefix="edgeloom-bench-logs-"))
    try:
        async with contextlib.AsyncExitStack() as stack:
            gateways = []
            for _ in range(args.gateways):
                gateway = await stack.enter_async_context(gateway_process(db.url, log_dir))
                say(f"gateway: edgeloom serve (pid {gateway.process.pid}) at {gateway.url}")
                gateways.append(gateway)
            capture_port, recorder = await stack.enter_async_context(capture_gateway(db.url))
            pool = await open_pool(plain_url(db.url), args.raw_pool)
            stack.push_async_callback(pool.close)
            bench = Bench(args, db, gateways, capture_port, recorder, pool, log_dir=log_dir)
            if not args.skip_peer and args.peer_workers > 1:
                workers = await stack.enter_async_context(
                    gateway_process(db.url, log_dir, workers=args.peer_workers)
                )
                say(f"gateway: edgeloom serve --workers {args.peer_workers} at {workers.url}")
                bench.sides[f"edgeloom N={args.peer_workers}"] = workers.url
            bench.sides = {"edgeloom N=1": gateways[0].url, **bench.sides}
            for size in sizes:
                results["stages"].append(await stage(bench, size))
                if args.json:
                    phases.dump(args.json, results)
    finally:
        if not args.keep:
            await db.drop()
            shutil.rmtree(log_dir, ignore_errors=True)
        else:
            say(f"kept: {db.url}; gateway logs in {log_dir}")
    vector_records = args.records if args.vectors is None else args.vectors
    if vector_records:
        # After the stages' server is gone: one bench database at a time on the machine.
        say(f"== vectors: {vector_records:,} records")
        asked = argparse.Namespace(
            records=vector_records,
            queries=min(args.queries, VECTOR_QUERIES),
            rounds=args.rounds,
            clients=args.load_clients,
            data_dir=None,
        )
        results["vectors"] = await vectors.measure(asked)
    results["rows"] = [r.__dict__ for r in rows(results)]
    return results


async def stage(bench: Bench, size: int) -> dict[str, Any]:
    say(f"== stage: {size:,} records")
    out: dict[str, Any] = {"target_records": size}
    out["load"] = await phases.load(bench, size)
    if out["load"]["records"]:
        say(f"loaded {out['load']['records']:,} records at {out['load']['records_per_s']:,.0f}/s")
    out["edges_load"] = await edges.load_edges(bench, bench.args.edges)
    out["records"] = await phases.count_records(bench)
    out["gather"] = await phases.gather_phase(bench)
    out["edges"] = await edges.raw_phase(bench)
    out["search"] = await search.search_phase(bench)
    for name, g in out["gather"].items():
        say(f"gather {name}:\n" + phases.explain_summary(g["explain"]))
    if not bench.args.skip_peer:
        out["peer"] = await peer.peer_phase(bench, bench.sides)
    if not bench.args.skip_writes:
        out["ingest"] = await phases.ingest_phase(bench)
        out["ingest_many"] = await phases.many_phase(bench)
    out["records_after"] = await phases.count_records(bench)
    out["finished_at"] = time.time()
    return out


def rows(results: dict[str, Any]) -> list[Row]:
    out: list[Row] = []
    stages = results["stages"]
    for s in stages:
        at = f"@{s['records']:,}"
        if "ingest" in s:
            gw, raw = (
                median(s["ingest"]["gateway_records_per_s"]),
                median(s["ingest"]["raw_records_per_s"]),
            )
            out.append(
                Row(
                    f"ingest x{s['ingest']['clients']} clients, records/s {at}",
                    gw,
                    raw,
                    gw / raw,
                    f">={TARGET_INGEST}",
                    gw / raw >= TARGET_INGEST,
                )
            )
        if "ingest_many" in s:
            m = s["ingest_many"]
            gw, raw = median(m["gateway_records_per_s"]), median(m["raw_records_per_s"])
            out.append(
                Row(
                    f"ingestMany 500/call x{m['clients']}, records/s {at}",
                    gw,
                    raw,
                    gw / raw,
                    f">={TARGET_MANY}",
                    gw / raw >= TARGET_MANY,
                )
            )
        for name, g in s["gather"].items():
            gw, raw = median(g["gateway_p50_ms"]), median(g["raw_p50_ms"])
            shape = g.get("shape", "INTERSECT")
            # The targets against raw and of asOf against now are the INTERSECT reads'; the
            # largest value's row is there for its growth with the memory (below).
            paired = shape == "INTERSECT"
            out.append(
                Row(
                    f"gather {name} {shape} p50 ms {at}",
                    gw,
                    raw,
                    gw / raw,
                    f"<={TARGET_GATHER}" if paired else "",
                    gw / raw <= TARGET_GATHER if paired else None,
                )
            )
            gw90, raw90 = median(g["gateway_p90_ms"]), median(g["raw_p90_ms"])
            out.append(
                Row(f"gather {name} {shape} p90 ms {at}", gw90, raw90, gw90 / raw90, "", None)
            )
            if "as_of_p50_ms" in g:
                # The same gather as of an instant, against itself now (not against raw).
                past = median(g["as_of_p50_ms"])
                out.append(
                    Row(
                        f"gather {name} asOf p50 ms (vs now) {at}",
                        past,
                        gw,
                        past / gw,
                        f"<={TARGET_AS_OF}" if paired else "",
                        past / gw <= TARGET_AS_OF if paired else None,
                    )
                )
            if "floor_p50_ms" in g:
                # No GraphQL at all, the same statement over HTTP: the hop's share of the ratio.
                fl = median(g["floor_p50_ms"])
                out.append(
                    Row(f"gather {name} p50 ms, HTTP floor {at}", fl, raw, fl / raw, "", None)
                )
        for name, e in s.get("edges", {}).items():
            # The compiled read against its own statement on asyncpg (no target).
            gw, raw = median(e["gateway_p50_ms"]), median(e["raw_p50_ms"])
            out.append(Row(f"{name} p50 ms {at}", gw, raw, gw / raw, "", None))
        for name, found in s.get("search", {}).items():
            gw, raw = median(found["gateway_p50_ms"]), median(found["raw_p50_ms"])
            out.append(
                Row(
                    f"search {name} ({found['hits']:,} hits) p50 ms {at}",
                    gw,
                    raw,
                    gw / raw,
                    f"<={TARGET_SEARCH}",
                    gw / raw <= TARGET_SEARCH,
                )
            )
            past = median(found["as_of_p50_ms"])
            out.append(
                Row(
                    f"search {name} asOf p50 ms (vs now) {at}",
                    past,
                    gw,
                    past / gw,
                    f"<={TARGET_AS_OF}",
                    past / gw <= TARGET_AS_OF,
                )
            )
        if s.get("peer"):
            out.extend(peer.rows(s["peer"], at, Row))
    if "vectors" in results:
        out.extend(vectors.rows(results["vectors"]))
    if len(stages) > 1:
        for name in stages[-1]["gather"]:
            if name not in stages[0]["gather"]:
                continue
            first, last = stages[0]["gather"][name], stages[-1]["gather"][name]
            gw = median(last["gateway_p50_ms"]) / median(first["gateway_p50_ms"])
            raw = median(last["raw_p50_ms"]) / median(first["raw_p50_ms"])
            # The maintained counts must keep a one-property call (the largest value) flat.
            paired = last.get("shape", "INTERSECT") == "INTERSECT"
            target = TARGET_SCALE if paired else TARGET_FLAT
            out.append(
                Row(
                    f"gather {name} p50 {stages[-1]['records']:,} / {stages[0]['records']:,}",
                    gw,
                    raw,
                    gw,
                    f"<={target}",
                    gw <= target,
                )
            )
        for name in stages[-1].get("search", {}):
            if name not in stages[0].get("search", {}):
                continue
            first, last = stages[0]["search"][name], stages[-1]["search"][name]
            gw = median(last["gateway_p50_ms"]) / median(first["gateway_p50_ms"])
            raw = median(last["raw_p50_ms"]) / median(first["raw_p50_ms"])
            metric = f"search {name} p50 {stages[-1]['records']:,} / {stages[0]['records']:,}"
            if last.get("match"):
                # With `match` the cost is to follow the smaller of the two sets, the
                # matches among the members: shown beside it, no flat target.
                growth = last["hits"] / max(first["hits"], 1)
                out.append(Row(f"{metric} (its hits x{growth:.1f})", gw, raw, gw, "", None))
                continue
            out.append(Row(metric, gw, raw, gw, f"<={TARGET_SCALE}", gw <= TARGET_SCALE))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import uvloop

        results = uvloop.run(run(args))
    except ImportError:
        results = asyncio.run(run(args))
    if args.json:
        phases.dump(args.json, results)
    out = [Row(**r) for r in results["rows"]]
    print()
    print(f"edgeloom bench ({os.cpu_count()} cores; medians of {args.rounds} alternating rounds)")
    own = [r for r in out if r.unit != "peer"]
    print(table(own))
    against = [r for r in out if r.unit == "peer"]
    if against:
        print()
        print("reads against PostGraphile 4, req/s at 16 connections, same database")
        print(table(against, left="edgeloom", right="PostGraphile"))
    missed = [r.metric for r in out if r.passed is False]
    if missed:
        print(f"\ntargets missed: {len(missed)}")
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
