"""The bench's phases: load, gather latency, single ingest, ingestMany; gateway vs raw."""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from bench import bulk, floor
from bench.capture import Recorder, Statement, Trace
from bench.data import Generator, gather_pairs, sized_pairs
from bench.http import Callers, LeanCaller, request_body
from bench.measure import Rate, latencies, median, percentile, say, throughput
from bench.raw import WriteTemplate, replay, run_unit
from bench.server import BenchDatabase, GatewayProcess
from store.kinds.record.commands import NewRecord

INGEST = "mutation Ingest($input: IngestInput!) { ingest(input: $input) { id version createdAt } }"
INGEST_MANY = "mutation IngestMany($inputs: [IngestInput!]!) { ingestMany(inputs: $inputs) { id } }"
GATHER = (
    "query Gather($match: [String!]!, $first: Int) { gather(match: $match, mode: INTERSECT, "
    "first: $first) { totalCount pageInfo { hasNextPage endCursor } "
    "items { id content properties createdAt } } }"
)
# The same gather as the memory was at an instant: served from the membership history.
GATHER_AS_OF = (
    "query Gather($match: [String!]!, $first: Int, $asOf: DateTime) { gather(match: $match, "
    "mode: INTERSECT, first: $first, asOf: $asOf) { totalCount pageInfo { hasNextPage "
    "endCursor } items { id content properties createdAt } } }"
)
# One property, the largest: its page with the count, and its member count, as an agent
# asks in a loop (both counts are maintained, so neither grows with the memory).
LARGEST = (
    "query Largest($match: [String!]!, $first: Int, $p: String!) { gather(match: $match, "
    "first: $first) { totalCount pageInfo { hasNextPage endCursor } "
    "items { id content properties createdAt } } edgeProperty(property: $p) { memberCount } }"
)
LARGEST_AS_OF = (
    "query Largest($match: [String!]!, $first: Int, $p: String!, $asOf: DateTime) { "
    "gather(match: $match, first: $first, asOf: $asOf) { totalCount pageInfo { hasNextPage "
    "endCursor } items { id content properties createdAt } } "
    "edgeProperty(property: $p, asOf: $asOf) { memberCount } }"
)
MANY_BATCH = 500


@dataclass
class Bench:
    """Everything one run shares: options, database, gateway, capture, raw pool, data."""

    args: Any
    db: BenchDatabase
    gateways: list[GatewayProcess]
    capture_port: int
    recorder: Recorder
    pool: asyncpg.Pool
    gen: Generator = field(default_factory=Generator)
    samples: list[list[str]] = field(default_factory=list)
    loaded: int = 0
    edges: int = 0  # typed edges loaded (bench/edges.py)
    sample_every: int = 1
    # Gateways compared with PostGraphile, by name (edgeloom N=1, N=2 workers).
    sides: dict[str, str] = field(default_factory=dict)
    # Where servers the bench starts write their logs.
    log_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))

    def callers(self, n: int) -> Callers:
        return Callers(self.args.client, "127.0.0.1", [g.port for g in self.gateways], n)

    async def capture(self, query: str, variables: dict[str, Any]) -> tuple[Trace, Any]:
        """One call through the in-process capture gateway, with the SQL it ran."""
        caller = LeanCaller("127.0.0.1", self.capture_port)
        try:
            with self.recorder.record() as trace:
                data = await caller.call(query, variables)
        finally:
            await caller.close()
        return trace, data

    async def rounds(
        self,
        name: str,
        gateway: Callable[[], Awaitable[Any]],
        raw: Callable[[], Awaitable[Any]],
    ) -> tuple[list[Any], list[Any]]:
        """Alternate gateway and raw (ABBA order) for `--rounds` rounds."""
        out = await self.rounds_of(name, {"gateway": gateway, "raw": raw})
        return out["gateway"], out["raw"]

    async def rounds_of(
        self, name: str, sides: dict[str, Callable[[], Awaitable[Any]]]
    ) -> dict[str, list[Any]]:
        """Each side once per round, in the given order and reversed in every other round
        (ABBA, ABCCBA), for `--rounds` rounds."""
        out: dict[str, list[Any]] = {side: [] for side in sides}
        for n in range(self.args.rounds):
            order = list(sides)
            if n % 2:
                order.reverse()
            for side in order:
                value = await sides[side]()
                out[side].append(value)
                say(f"  {name} round {n + 1} {side}: {_short(value)}")
        return out


def _short(value: Any) -> str:
    if isinstance(value, Rate):
        rate = value.records_per_s
        return f"{rate:,.0f} records/s ({value.calls:,} calls in {value.seconds:.1f}s)"
    if isinstance(value, list):
        p50, p90 = percentile(value, 0.5) * 1000, percentile(value, 0.9) * 1000
        return f"p50 {p50:.2f} ms, p90 {p90:.2f} ms"
    return str(value)


# -- load -------------------------------------------------------------------------


async def load(bench: Bench, target: int) -> dict[str, Any]:
    """Write records up to `target` in all (the write measurements of an earlier stage
    count too) through the store's Ingest command from the bench process (`bench/bulk.py`):
    the write path itself, without the HTTP and GraphQL a load does not measure."""
    todo = target - await count_records(bench)
    if todo <= 0:
        return {"records": 0, "seconds": 0.0}
    bench.sample_every = max(1, target // 20_000)

    def make(n: int) -> list[NewRecord]:
        batch = bench.gen.records(n)
        for i, record in enumerate(batch):
            if (bench.gen.count - n + i) % bench.sample_every == 0:
                bench.samples.append(list(record["properties"]))  # type: ignore[call-overload]
        return [NewRecord(str(r["content"]), tuple(r["properties"])) for r in batch]  # type: ignore[arg-type]

    started = time.monotonic()
    async with bulk.executor(bench.db.url, bench.args.load_clients) as executor:
        await bulk.ingest(executor, make, todo, bench.args.load_clients, f"loading to {target:,}")
    seconds = time.monotonic() - started
    bench.loaded = target
    async with bench.pool.acquire() as conn:
        for table in ("records", "ledger", "edge_properties", "audit_events"):
            await conn.execute(f"VACUUM (ANALYZE) {table}")
    return {"records": todo, "seconds": seconds, "records_per_s": todo / seconds}


async def count_records(bench: Bench) -> int:
    async with bench.pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM records"))


# -- gather ---------------------------------------------------------------------------


async def gather_phase(bench: Bench) -> dict[str, Any]:
    """Three workloads: `zipf` pairs (ranks as the data has them, so member counts grow
    with N), `sized` pairs (member counts in fixed bands, the same work at any N), and
    `largest`, the one property with the most members and its `memberCount` (maintained
    counts: the same work at any N)."""
    zipf = gather_pairs(bench.samples, bench.args.queries)
    out = {"zipf": await _gather(bench, "zipf", _pair_calls(bench, zipf))}
    async with bench.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT label || ':' || value, count(*) FROM edge_properties "
            "WHERE recorded_to IS NULL GROUP BY label, value"
        )
    members = {r[0]: r[1] for r in rows}
    sized = sized_pairs(bench.samples, members, bench.args.queries)
    if sized:
        out["sized"] = await _gather(bench, "sized", _pair_calls(bench, sized))
    else:
        say("gather sized: no pair of properties in the member bands; skipped")
    largest = max(members, key=lambda p: (members[p], p))
    one = {"match": [largest], "first": bench.args.page, "p": largest}
    out["largest"] = await _gather(
        bench, "largest", [one] * bench.args.queries, Shape(LARGEST, LARGEST_AS_OF, "one property")
    )
    return out


@dataclass(frozen=True)
class Shape:
    """A gather workload's document, the same as of an instant, and how its rows name it."""

    query: str = GATHER
    as_of: str = GATHER_AS_OF
    named: str = "INTERSECT"


def _pair_calls(bench: Bench, pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"match": [a, b], "first": bench.args.page} for a, b in pairs]


async def _gather(
    bench: Bench, name: str, variables: list[dict[str, Any]], shape: Shape = Shape()
) -> dict[str, Any]:
    traces: list[Trace] = []
    totals: list[int] = []
    for v in variables:
        trace, data = await bench.capture(shape.query, v)
        traces.append(trace)
        totals.append(data["gather"]["totalCount"])
        if "edgeProperty" in data and data["edgeProperty"]["memberCount"] != totals[-1]:
            raise RuntimeError(f"memberCount {data['edgeProperty']} != totalCount {totals[-1]}")
    await _check_counts(bench, traces[:5], totals[:5])
    say(
        f"gather {name}: {len(variables)} {shape.named} calls, members min {min(totals):,} / "
        f"median {int(median(totals)):,} / max {max(totals):,}; "
        f"{sum(len(u.statements) for u in traces[0])} statements in "
        f"{len(traces[0])} transactions per call"
    )
    explain = await _explain(bench, traces, totals)
    # An instant after everything loaded: the same members, found by the history index.
    at = datetime.now(UTC).isoformat()
    past = [{**v, "asOf": at} for v in variables]
    callers = bench.callers(1)
    caller = callers.items[0]
    for v, total in zip(past[:5], totals[:5], strict=True):
        got = (await caller.call(shape.as_of, v))["gather"]["totalCount"]
        if got != total:
            raise RuntimeError(f"gather asOf {at} counts {got}, now {total}")

    async def gw_one(v: dict[str, Any]) -> Any:
        return await caller.call(shape.query, v)

    async def gw_past(v: dict[str, Any]) -> Any:
        return await caller.call(shape.as_of, v)

    async def raw_one(trace: Trace) -> None:
        rows = await replay(bench.pool, trace)
        if rows and "body" in rows[0].keys():  # noqa: SIM118 - a Record's `in` reads values
            # The compiled read's response as JSON text: decoded as the HTTP caller decodes
            # the gateway's, so both sides end with the data in hand.
            json.loads(rows[0]["body"])

    sides = {
        "gateway": lambda: latencies(variables, gw_one),
        "raw": lambda: latencies(traces, raw_one),
        "gateway asOf": lambda: latencies(past, gw_past),
    }
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(callers.close)
        table = _floor_table(shape.query, variables, traces)
        if table is None:
            say(f"gather {name}: not one statement per call; the HTTP floor is left out")
        else:
            port = await stack.enter_async_context(
                floor.floor_process(bench.db.url, table, bench.log_dir)
            )
            floor_caller = LeanCaller("127.0.0.1", port)
            stack.push_async_callback(floor_caller.close)

            async def floor_one(v: dict[str, Any]) -> Any:
                return await floor_caller.call(shape.query, v)

            sides["HTTP floor"] = lambda: latencies(variables, floor_one)
        for side in sides.values():
            await side()  # warm-up: caches, prepared statements, buffers
        got = await bench.rounds_of(f"gather {name}", sides)
    out = {
        "queries": len(variables),
        "shape": shape.named,
        "shared_members": {"min": min(totals), "median": median(totals), "max": max(totals)},
        "explain": explain,
    }
    pairs_of_sides = (
        ("gateway", "gateway"),
        ("raw", "raw"),
        ("HTTP floor", "floor"),
        ("gateway asOf", "as_of"),
    )
    for side, key in pairs_of_sides:
        if side in got:
            out[f"{key}_p50_ms"] = [percentile(x, 0.5) * 1000 for x in got[side]]
            out[f"{key}_p90_ms"] = [percentile(x, 0.9) * 1000 for x in got[side]]
    return out


def _floor_table(
    query: str, variables: list[dict[str, Any]], traces: list[Trace]
) -> floor.Table | None:
    """Each call's request body and the one statement the gateway ran for it."""
    table: floor.Table = {}
    for v, trace in zip(variables, traces, strict=True):
        statements = [s for unit in trace for s in unit.statements]
        if len(statements) != 1:
            return None
        table[request_body(query, v)] = (statements[0].sql, list(statements[0].params))
    return table


async def _check_counts(bench: Bench, traces: list[Trace], totals: list[int]) -> None:
    """The raw replay of the count statement gives the totalCount the gateway returned."""
    async with bench.pool.acquire() as conn:
        for trace, total in zip(traces, totals, strict=True):
            stmts = [s for s in trace[0].statements if not s.sql.startswith("BEGIN")]
            row = await conn.fetchrow(stmts[0].sql, *stmts[0].params)
            assert row is not None
            # (`in` on an asyncpg Record looks at values, not names.)
            if "body" in row.keys():  # noqa: SIM118 - the compiled read: the whole response
                got = json.loads(row["body"])["data"]["gather"]["totalCount"]
            else:  # the page statement with its count
                got = row["total"]
            if got != total:
                raise RuntimeError(f"raw count {got} != gateway totalCount {total}")


_NODE = re.compile(r"->\s+|^\s*[A-Z][A-Za-z ]+(Scan|Join|Loop|Aggregate|Unique|Limit|Sort)")


async def _explain(bench: Bench, traces: list[Trace], totals: list[int]) -> list[dict[str, Any]]:
    """EXPLAIN (ANALYZE, BUFFERS) of the count and page statements for the median-sized
    and the largest intersection."""
    order = sorted(range(len(totals)), key=lambda i: totals[i])
    picks = {"median": order[len(order) // 2], "largest": order[-1]}
    plans: list[dict[str, Any]] = []
    async with bench.pool.acquire() as conn:
        for name, i in picks.items():
            statements = [s for s in traces[i][0].statements if s.sql not in ("ROLLBACK",)]
            for stmt in [s for s in statements if not s.sql.startswith("BEGIN")][:2]:
                rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + stmt.sql, *stmt.params)
                lines = [r[0] for r in rows]
                kind = "compiled" if "json_build_object" in stmt.sql else "page"
                plans.append(
                    {
                        "case": name,
                        "statement": kind,
                        "shared_members": totals[i],
                        "params": [str(p) for p in stmt.params],
                        "plan": lines,
                        "seq_scan": any("Seq Scan" in line for line in lines),
                    }
                )
    return plans


def explain_summary(plans: list[dict[str, Any]]) -> str:
    out: list[str] = []
    for p in plans:
        # The pair's labels and values are the parameters that are neither lists nor numbers.
        words = [v for v in p["params"] if not v.startswith("[") and not v.isdigit()]
        pairs = (f"{a}:{b}" for a, b in zip(words[::2], words[1::2], strict=False))
        props = " & ".join(dict.fromkeys(pairs))  # one property named twice is one
        out.append(
            f"{p['case']} pair ({props}, {p['shared_members']:,} shared), {p['statement']} query:"
        )
        for line in p["plan"]:
            text = line.strip()
            if _NODE.search(line) or text.startswith(("Execution Time", "Planning Time")):
                out.append("    " + line.rstrip())
        if p["seq_scan"]:
            out.append("    !! sequential scan in this plan")
    return "\n".join(out)


# -- writes -------------------------------------------------------------------------


async def ingest_phase(bench: Bench) -> dict[str, Any]:
    """Single-record ingest, `--clients` concurrent callers, gateway vs raw."""
    args = bench.args
    inputs = bench.gen.records(2000)
    templates = []
    for record in inputs[:32]:
        trace, _ = await bench.capture(INGEST, {"input": record})
        templates.append(WriteTemplate.of(trace))
    say(
        f"ingest: {len(templates[0].unit.statements)} statements per transaction "
        f"({', '.join(_verb(s) for s in templates[0].unit.statements)})"
    )
    return await _write_rounds(bench, "ingest", INGEST, "input", inputs, templates, args.clients)


async def many_phase(bench: Bench) -> dict[str, Any]:
    """ingestMany of 500 records per call, `--many-clients` concurrent callers."""
    batches = [bench.gen.records(MANY_BATCH) for _ in range(8)]
    templates = []
    for batch in batches[:3]:
        trace, _ = await bench.capture(INGEST_MANY, {"inputs": batch})
        templates.append(WriteTemplate.of(trace))
    return await _write_rounds(
        bench, "ingestMany", INGEST_MANY, "inputs", batches, templates, bench.args.many_clients
    )


def _verb(stmt: Statement) -> str:
    words = stmt.sql.split()
    text = f"INSERT {words[2]}" if words[0] == "INSERT" else words[0]
    if "FOR SHARE" in stmt.sql:
        text += " ... FOR SHARE"
    return text + (f" x{len(stmt.params)} (executemany)" if stmt.many else "")


async def _write_rounds(
    bench: Bench,
    name: str,
    query: str,
    key: str,
    inputs: list[Any],
    templates: list[WriteTemplate],
    workers: int,
) -> dict[str, Any]:
    args = bench.args
    callers = bench.callers(workers)
    counter = [0]
    per_call = MANY_BATCH if key == "inputs" else 1

    async def gw_op(w: int) -> int:
        counter[0] += 1
        await callers.items[w].call(query, {key: inputs[counter[0] % len(inputs)]})
        return per_call

    async def raw_op(w: int) -> int:
        counter[0] += 1
        template = templates[counter[0] % len(templates)]
        params = template.fresh()
        async with bench.pool.acquire() as conn:
            await run_unit(conn, template.unit, params)
        return template.records

    try:
        warm = min(2.0, args.duration / 2)
        await throughput(workers, warm, gw_op)
        await throughput(workers, warm, raw_op)
        gw, raw = await bench.rounds(
            name,
            lambda: throughput(workers, args.duration, gw_op),
            lambda: throughput(workers, args.duration, raw_op),
        )
    finally:
        await callers.close()
    return {
        "clients": workers,
        "records_per_call": per_call,
        "statements": [_verb(s) for s in templates[0].unit.statements],
        "gateway_records_per_s": [r.records_per_s for r in gw],
        "raw_records_per_s": [r.records_per_s for r in raw],
        "gateway_calls": [r.calls for r in gw],
        "raw_calls": [r.calls for r in raw],
    }


def dump(path: str, results: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as sink:
        json.dump(results, sink, indent=2, default=str)
