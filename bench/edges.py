"""Typed edges for the bench: loaded through the gateway, read against raw and PostGraphile.

The load writes a few thousand typed edges among the loaded records with `upsertEdge`
(the real write path: guard, ledger entry, projection, events), evidence objects on half
of them, then retires one in ten with `retireEdge` and resolves a third of the
contradictions with `resolveConflict`; the rest wait in the review queue. PostGraphile
gets an idiomatic copy of the `edges` projection (`peer.edges`: plain columns, foreign
keys to `records`, an index on each end and one for the queue), so its connection
queries are what a PostGraphile user would write.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

from bench.capture import Trace
from bench.measure import latencies, percentile, say
from bench.phases import Bench
from bench.raw import replay

EDGES = 4_000
HUBS = 400  # records with edges out (about ten each)
TYPES = (("supports", 0.6), ("derived_from", 0.25), ("contradicts", 0.15))

UPSERT = "mutation U($input: EdgeInput!) { upsertEdge(input: $input) { id type } }"
RETIRE = "mutation R($id: ID!) { retireEdge(id: $id) { id } }"
RESOLVE = (
    "mutation C($id: ID!) { resolveConflict(edgeId: $id, resolution: ACCEPTED_DUAL, "
    'resolver: "bench-reviewer") { id } }'
)

_EDGE = "id fromId toId type namespace weight confidence provenanceType evidence"
_END = "{ id content }"
EDGES_BY_FROM = (
    "query E($id: ID!) { edges(fromId: $id, first: 20) { totalCount "
    f"items {{ {_EDGE} }} pageInfo {{ hasNextPage }} }} }}"
)
PEER_EDGES_BY_FROM = (
    "query E($id: String!) { allEdges(condition: {fromId: $id, invalidAt: null}, "
    "orderBy: [CREATED_AT_ASC, ID_ASC], first: 20) { totalCount "
    f"items: nodes {{ {_EDGE} }} pageInfo {{ hasNextPage }} }} }}"
)
RELATED = (
    f"query R($id: ID!) {{ related(id: $id) {{ record {_END} "
    f"outgoing(first: 20) {{ items {{ {_EDGE} toRecord {_END} }} }} "
    f"incoming(first: 20) {{ items {{ {_EDGE} fromRecord {_END} }} }} }} }}"
)
_PEER_SIDE = "(condition: {invalidAt: null}, orderBy: [CREATED_AT_ASC, ID_ASC], first: 20)"
PEER_RELATED = (
    "query R($id: String!) { recordById(id: $id) { id content "
    f"outgoing: edgesByFromId{_PEER_SIDE} {{ nodes {{ {_EDGE} toRecord: recordByToId {_END} }} }} "
    f"incoming: edgesByToId{_PEER_SIDE} {{ nodes {{ {_EDGE} fromRecord: recordByFromId {_END} }} }}"
    " } }"
)
_QUEUE_EDGE = f"{_EDGE} provenanceActor conflictState fromRecord {_END} toRecord {_END}"
CONFLICTS = (
    f"{{ conflicts(first: 20) {{ totalCount items {{ {_QUEUE_EDGE} }} "
    "pageInfo { hasNextPage } } }"
)
PEER_CONFLICTS = (
    '{ allEdges(condition: {type: "contradicts", conflictState: "unresolved", invalidAt: null}, '
    "orderBy: [CREATED_AT_ASC, ID_ASC], first: 20) { totalCount items: nodes { "
    + _QUEUE_EDGE.replace("fromRecord", "fromRecord: recordByFromId").replace(
        "toRecord", "toRecord: recordByToId"
    )
    + " } pageInfo { hasNextPage } } }"
)

# The idiomatic table PostGraphile reads: the projection's columns a user would keep.
PEER_TABLE = """
CREATE SCHEMA IF NOT EXISTS peer;
COMMENT ON TABLE public.edges IS E'@omit';
DROP TABLE IF EXISTS peer.edges;
CREATE TABLE peer.edges (
  id text COLLATE "C" PRIMARY KEY,
  from_id text COLLATE "C" NOT NULL REFERENCES public.records (id),
  to_id text COLLATE "C" NOT NULL REFERENCES public.records (id),
  type text NOT NULL,
  namespace text NOT NULL,
  weight float8 NOT NULL,
  confidence float8,
  provenance_actor text NOT NULL,
  provenance_type text NOT NULL,
  evidence jsonb,
  valid_at timestamptz NOT NULL,
  invalid_at timestamptz,
  conflict_state text,
  resolution text,
  resolver text,
  created_at timestamptz NOT NULL
);
INSERT INTO peer.edges SELECT id, from_id, to_id, type, namespace, weight, confidence,
  provenance_actor, provenance_type, evidence, valid_at, invalid_at, conflict_state,
  resolution, resolver, created_at FROM public.edges;
CREATE INDEX ON peer.edges (from_id, created_at, id);
CREATE INDEX ON peer.edges (to_id, created_at, id);
CREATE INDEX ON peer.edges (type, conflict_state, created_at, id);
ANALYZE peer.edges;
"""


async def load_edges(bench: Bench, count: int = EDGES) -> dict[str, Any]:
    """Typed edges through the gateway, up to `count` in all (none again at a later stage)."""
    async with bench.pool.acquire() as conn:
        have = int(await conn.fetchval("SELECT count(*) FROM edges"))
        if have >= count:
            bench.edges = have
            return {"edges": 0}
        ids = [r[0] for r in await conn.fetch("SELECT id FROM records ORDER BY id LIMIT 20000")]
    count = min(count, len(ids))  # a tiny load gets as many edges as records
    rng = random.Random(5)
    hubs = rng.sample(ids, min(HUBS, len(ids)))
    names, weights = zip(*TYPES, strict=True)
    inputs: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    while len(inputs) < count - have:
        a, b, kind = rng.choice(hubs), rng.choice(ids), rng.choices(names, weights)[0]
        if a == b or (a, b, kind) in seen:
            continue
        seen.add((a, b, kind))
        edge: dict[str, Any] = {
            "fromId": a,
            "toId": b,
            "type": kind,
            "weight": round(rng.random(), 3),
            "provenanceType": rng.choice(["agent", "human", "rule"]),
        }
        if rng.random() < 0.5:
            edge["evidence"] = {
                "quote": f"bench quote {len(inputs)}",
                "source": "bench",
                "offset": 0,
            }
            edge["confidence"] = round(rng.random(), 2)
        inputs.append(edge)
    callers = bench.callers(bench.args.load_clients)
    made: list[tuple[str, str]] = []
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def worker(n: int, todo: list[tuple[str, dict[str, Any]]]) -> None:
        caller = callers.items[n]
        while todo:
            query, variables = todo.pop()
            data = await caller.call(query, variables)
            if "upsertEdge" in data:
                made.append((data["upsertEdge"]["id"], data["upsertEdge"]["type"]))

    async def run(todo: list[tuple[str, dict[str, Any]]]) -> None:
        await asyncio.gather(*(worker(n, todo) for n in range(len(callers.items))))

    try:
        await run([(UPSERT, {"input": e}) for e in reversed(inputs)])
        upserted = loop.time() - start
        made.sort()
        retired = [e for e in rng.sample(made, len(made) // 10)]
        gone = {i for i, _ in retired}
        queue = [i for i, t in made if t == "contradicts" and i not in gone]
        resolved = rng.sample(queue, len(queue) // 3)
        await run(
            [(RETIRE, {"id": i}) for i, _ in retired] + [(RESOLVE, {"id": i}) for i in resolved]
        )
    finally:
        await callers.close()
    bench.edges = len(made) + have
    async with bench.pool.acquire() as conn:
        for table in ("edges", "ledger"):
            await conn.execute(f"VACUUM (ANALYZE) {table}")
    out = {
        "edges": len(made),
        "edges_per_s": len(made) / upserted,
        "retired": len(retired),
        "contradicts": sum(t == "contradicts" for _, t in made),
        "resolved": len(resolved),
    }
    say(
        f"loaded {out['edges']:,} typed edges at {out['edges_per_s']:,.0f}/s (upsertEdge); "
        f"{out['retired']} retired, {out['contradicts']} contradicts, {out['resolved']} resolved"
    )
    return out


async def pools(bench: Bench, size: int = 400) -> dict[str, list[dict[str, Any]]]:
    """Variables of each read: hubs for edges(fromId), records at either end for related."""
    async with bench.pool.acquire() as conn:
        hubs = [
            r[0]
            for r in await conn.fetch(
                "SELECT DISTINCT from_id FROM edges WHERE invalid_at IS NULL ORDER BY 1"
            )
        ]
        ends = [
            r[0]
            for r in await conn.fetch(
                "SELECT DISTINCT to_id FROM edges WHERE invalid_at IS NULL ORDER BY 1"
            )
        ]
    rng = random.Random(13)
    hubs = rng.sample(hubs, min(size, len(hubs)))
    ends = rng.sample(ends, min(size // 2, len(ends)))
    around = hubs[: size // 2] + ends
    rng.shuffle(around)
    return {
        "edges": [{"id": i} for i in hubs],
        "related": [{"id": i} for i in around],
        "conflicts": [{}],
    }


# Each read: (name in the tables, our query, PostGraphile's, the pool of variables).
READS = (
    ("edges(fromId, first: 20) with totalCount", EDGES_BY_FROM, PEER_EDGES_BY_FROM, "edges"),
    ("related(id) with both ends", RELATED, PEER_RELATED, "related"),
    ("conflicts(first: 20) with totalCount", CONFLICTS, PEER_CONFLICTS, "conflicts"),
)


def same(data: dict[str, Any]) -> Any:
    """One side's answer in comparable form (PostGraphile's `recordById` as `related`)."""
    (value,) = data.values()
    if value is None:
        return None
    if "id" in value and "outgoing" in value:
        return {
            "record": {"id": value["id"], "content": value["content"]},
            "outgoing": value["outgoing"]["nodes"],
            "incoming": value["incoming"]["nodes"],
        }
    if "outgoing" in value:
        return {
            **value,
            "outgoing": value["outgoing"]["items"],
            "incoming": value["incoming"]["items"],
        }
    return value


def compiled(trace: Trace) -> bool:
    """Whether a read ran on the compiled path: one statement, no transaction, the
    whole response built in SQL."""
    statements = [s for unit in trace for s in unit.statements]
    return len(statements) == 1 and "json_build_object" in statements[0].sql


async def raw_phase(bench: Bench) -> dict[str, Any]:
    """Each read one call at a time on the gateway and as its recorded SQL on asyncpg
    (`--queries` calls of each); every call must have run on the compiled path."""
    per_read = bench.args.queries
    variables = await pools(bench)
    out: dict[str, Any] = {}
    callers = bench.callers(1)
    caller = callers.items[0]
    try:
        for name, query, _, pool in READS:
            calls = (variables[pool] * per_read)[:per_read]
            traces: list[Trace] = []
            for v in calls:
                trace, _ = await bench.capture(query, v)
                traces.append(trace)
            fallback = sum(not compiled(t) for t in traces)
            if fallback:
                raise RuntimeError(
                    f"{name}: {fallback} of {len(traces)} calls left the compiled path"
                )
            say(f"{name}: {len(traces)} calls, every one on the compiled path (one statement)")

            async def gw_one(v: dict[str, Any], query: str = query) -> Any:
                return await caller.call(query, v)

            async def raw_one(trace: Trace) -> None:
                rows = await replay(bench.pool, trace)
                json.loads(rows[0]["body"])

            sides = {
                "gateway": lambda c=calls, f=gw_one: latencies(c, f),
                "raw": lambda t=traces: latencies(t, raw_one),
            }
            for side in sides.values():
                await side()  # warm-up
            got = await bench.rounds_of(name, sides)
            out[name] = {
                "calls": len(calls),
                "compiled": len(traces) - fallback,
                **{f"{k}_p50_ms": [percentile(x, 0.5) * 1000 for x in got[k]] for k in got},
            }
    finally:
        await callers.close()
    return out
