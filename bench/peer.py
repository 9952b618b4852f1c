"""The gateway against PostGraphile 4 on the same database: reads, requests per second.

PostGraphile is installed from npm into bench/.node (git-ignored) when `node` and
`npm` exist; otherwise this part is skipped with a message. It serves the same
tables (schema `public`) plus one SQL function for the intersect gather (schema
`peer`, the same self-join the gateway runs). Both sides first answer a sample of
the requests and must return the same records; then `wrk` (or, without it, the
bench's lean Python client) drives each with the same concurrency and the same
rotating request bodies, in alternating rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench import edges
from bench.data import gather_pairs
from bench.measure import median, say
from bench.phases import Bench
from bench.server import REPO, free_port, plain_url

NODE_DIR = REPO / "bench" / ".node"
POSTGRAPHILE = NODE_DIR / "node_modules" / "postgraphile" / "cli.js"
CONNECTIONS = 16

PEER_SQL = """
CREATE SCHEMA IF NOT EXISTS peer;
CREATE OR REPLACE FUNCTION peer.gather_intersect(
  a_label text, a_value text, b_label text, b_value text
) RETURNS SETOF public.records LANGUAGE sql STABLE AS $$
  SELECT r.* FROM public.records r WHERE r.id IN (
    SELECT m0.record_id FROM public.edge_properties m0
    JOIN public.edge_properties m1 ON m1.record_id = m0.record_id AND m1.label = b_label
      AND m1.value_key = public.edgeloom_value_key(b_value) AND m1.lane = m0.lane
      AND m1.recorded_to IS NULL
    WHERE m0.label = a_label AND m0.value_key = public.edgeloom_value_key(a_value)
      AND m0.recorded_to IS NULL)
  ORDER BY r.id
$$;
CREATE OR REPLACE FUNCTION peer.edge_property_members(a_label text, a_value text)
RETURNS SETOF public.records LANGUAGE sql STABLE AS $$
  SELECT r.* FROM public.records r WHERE r.id IN (
    SELECT m.record_id FROM public.edge_properties m
    WHERE m.label = a_label AND m.value_key = public.edgeloom_value_key(a_value)
      AND m.recorded_to IS NULL)
  ORDER BY r.id
$$;
"""

RECORD = "query R($id: ID!) { record(id: $id) { id content properties } }"
PEER_RECORD = "query R($id: String!) { recordById(id: $id) { id content properties } }"
GATHER = (
    "query G($match: [String!]!) { gather(match: $match, mode: INTERSECT, first: 20) "
    "{ totalCount items { id content properties createdAt } pageInfo { hasNextPage endCursor } } }"
)
PEER_GATHER = (
    "query G($a: String!, $b: String!, $c: String!, $d: String!) { gatherIntersect(aLabel: $a, "
    "aValue: $b, bLabel: $c, bValue: $d, first: 20) { totalCount nodes { id content properties "
    "createdAt } pageInfo { hasNextPage endCursor } } }"
)
EDGE_PROPERTY = (
    "query E($p: String!) { edgeProperty(property: $p) { memberCount members(first: 20) "
    "{ items { id content properties } pageInfo { hasNextPage endCursor } } } }"
)
PEER_EDGE_PROPERTY = (
    "query E($a: String!, $b: String!) { edgePropertyMembers(aLabel: $a, aValue: $b, first: 20) "
    "{ totalCount nodes { id content properties } pageInfo { hasNextPage endCursor } } }"
)
RECORDS = (
    "{ records(first: 20) { items { id content properties } pageInfo { hasNextPage endCursor } } }"
)
PEER_RECORDS = (
    "{ allRecords(first: 20, orderBy: [CREATED_AT_ASC, ID_ASC], "
    'condition: {lane: "default", retiredAt: null}) '
    "{ nodes { id content properties } pageInfo { hasNextPage endCursor } } }"
)
RECORDS_COUNT = RECORDS.replace("{ items", "{ totalCount items", 1)
PEER_RECORDS_COUNT = PEER_RECORDS.replace("{ nodes", "{ totalCount nodes", 1)
RECORDS_COUNT_NAME = "records(first: 20) with totalCount"

LUA = r"""
local bodies = {}
for line in io.lines(os.getenv("EDGELOOM_BODIES")) do bodies[#bodies + 1] = line end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  return wrk.format(nil, "/graphql", nil, bodies[math.random(#bodies)])
end
local shown = 0
response = function(status, headers, body)
  if status ~= 200 and shown < 3 then
    shown = shown + 1
    io.stderr:write("answer " .. status .. ": " .. string.sub(body, 1, 300) .. "\n")
  end
end
"""


@dataclass
class Workload:
    """One read: a request body per pool entry for each side, and how to compare them."""

    name: str
    ours: list[str]
    theirs: list[str]
    # Each side's answer in comparable form.
    same: Callable[[dict[str, Any]], Any] = lambda data: _records(data)


def ensure_postgraphile() -> Path | None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        say("peer: node/npm not found; PostGraphile comparison skipped")
        return None
    if not POSTGRAPHILE.exists():
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        say("peer: installing postgraphile@4 from npm into bench/.node")
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "postgraphile@4"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not POSTGRAPHILE.exists():
            say(f"peer: npm install failed; comparison skipped\n{done.stderr[-1000:]}")
            return None
    return POSTGRAPHILE


@contextlib.asynccontextmanager
async def postgraphile(database_url: str, log_dir: Path) -> AsyncIterator[str]:
    cli = POSTGRAPHILE
    port = free_port()
    log = log_dir / f"postgraphile-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            ["node", str(cli), "-c", plain_url(database_url), "-s", "public,peer"]
            + ["-n", "127.0.0.1", "-p", str(port), "--dynamic-json", "--disable-query-log"]
            + ["--disable-default-mutations", "--no-setof-functions-contain-nulls"]
            + ["--max-pool-size", str(CONNECTIONS)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NODE_ENV": "production"},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        async with httpx.AsyncClient(timeout=5) as client:
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("PostGraphile did not start: " + log.read_text()[-2000:])
                with contextlib.suppress(httpx.HTTPError):
                    reply = await client.post(url + "/graphql", json={"query": "{ __typename }"})
                    if reply.status_code == 200:
                        break
                await asyncio.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


async def workloads(bench: Bench, pool_size: int = 1000) -> list[Workload]:
    rng = random.Random(11)
    async with bench.pool.acquire() as conn:
        ids = [
            r[0]
            for r in await conn.fetch(
                "SELECT id FROM records ORDER BY random() LIMIT $1", pool_size
            )
        ]
    pairs = gather_pairs(bench.samples, min(pool_size, 400))

    def body(query: str, variables: dict[str, Any] | None = None) -> str:
        return json.dumps({"query": query, "variables": variables or {}})

    split = [(a.split(":", 1), b.split(":", 1)) for a, b in pairs]
    rng.shuffle(ids)
    reads = [
        Workload(
            "record(id) with properties",
            [body(RECORD, {"id": i}) for i in ids],
            [body(PEER_RECORD, {"id": i}) for i in ids],
        ),
        Workload(
            "gather(INTERSECT, first: 20) with totalCount",
            [body(GATHER, {"match": [a, b]}) for a, b in pairs],
            [body(PEER_GATHER, {"a": x[0], "b": x[1], "c": y[0], "d": y[1]}) for x, y in split],
        ),
        Workload(
            "edgeProperty(p) { memberCount members(first: 20) }",
            [body(EDGE_PROPERTY, {"p": a}) for a, _ in pairs],
            [body(PEER_EDGE_PROPERTY, {"a": x[0], "b": x[1]}) for x, _ in split],
            _members,
        ),
        Workload("records(first: 20)", [body(RECORDS)], [body(PEER_RECORDS)]),
        Workload(RECORDS_COUNT_NAME, [body(RECORDS_COUNT)], [body(PEER_RECORDS_COUNT)]),
    ]
    if bench.edges:
        # Typed edges: ours on the projection, PostGraphile's on its idiomatic copy.
        pool = await edges.pools(bench)
        for name, query, theirs, key in edges.READS:
            vs = pool[key]
            reads.append(
                Workload(
                    name,
                    [body(query, v) for v in vs],
                    [body(theirs, v) for v in vs],
                    edges.same,
                )
            )
    return reads


def _records(data: dict[str, Any]) -> Any:
    """One side's answer as comparable records: ids, content, label:value properties."""
    (value,) = data.values()
    if value is None:
        return None
    if "items" in value or "nodes" in value:
        items = value.get("items", value.get("nodes"))
        return {
            "total": value.get("totalCount"),
            "next": value["pageInfo"]["hasNextPage"],
            "items": [_records({"x": item}) for item in items],
        }
    props = value["properties"]
    if props and isinstance(props[0], list):
        props = [f"{p[0]}:{p[1]}" for p in props if not p[0].startswith("e_")]
    return {"id": value["id"], "content": value["content"], "properties": props}


def _members(data: dict[str, Any]) -> Any:
    """An edge property's count and first members, from either side's shape."""
    (value,) = data.values()
    if "members" in value:
        page = value["members"]
        return _records({"x": {**page, "totalCount": value["memberCount"]}})
    return _records(data)


async def check_same(ours: str, theirs: str, work: Workload, sample: int = 20) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        for a, b in list(zip(work.ours, work.theirs, strict=True))[:sample]:
            mine = (await client.post(ours + "/graphql", content=a, headers=_JSON)).json()
            peer = (await client.post(theirs + "/graphql", content=b, headers=_JSON)).json()
            if "errors" in mine or "errors" in peer:
                raise RuntimeError(f"{work.name}: errors {mine.get('errors')} {peer.get('errors')}")
            if work.same(mine["data"]) != work.same(peer["data"]):
                raise RuntimeError(f"{work.name}: the two sides differ for {a}")


_JSON = {"content-type": "application/json"}


async def drive(url: str, bodies: list[str], seconds: float) -> float:
    """Requests per second at CONNECTIONS connections for `seconds`."""
    wrk = shutil.which("wrk")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bodies.txt"
        path.write_text("\n".join(bodies) + "\n")
        if wrk is None:
            return await _drive_python(url, bodies, seconds)
        script = Path(folder) / "rotate.lua"
        script.write_text(LUA)
        done = await asyncio.create_subprocess_exec(
            wrk,
            "-t1",
            f"-c{CONNECTIONS}",
            f"-d{max(1, round(seconds))}s",
            "-s",
            str(script),
            url + "/graphql",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "EDGELOOM_BODIES": str(path)},
        )
        out = (await done.communicate())[0].decode()
    if "Non-2xx" in out:
        raise RuntimeError(f"non-2xx answers under load:\n{out}")
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if found is None:
        raise RuntimeError(f"wrk printed no rate:\n{out}")
    return float(found.group(1))


async def _drive_python(url: str, bodies: list[str], seconds: float) -> float:
    from bench.http import LeanCaller

    port = int(url.rsplit(":", 1)[1])
    count = 0
    stop = time.monotonic() + seconds

    async def client() -> None:
        nonlocal count
        caller = LeanCaller("127.0.0.1", port)
        try:
            while time.monotonic() < stop:
                body = json.loads(random.choice(bodies))
                await caller.call(body["query"], body["variables"])
                count += 1
        finally:
            await caller.close()

    start = time.monotonic()
    await asyncio.gather(*(client() for _ in range(CONNECTIONS)))
    return count / (time.monotonic() - start)


async def peer_phase(bench: Bench, sides: dict[str, str]) -> dict[str, Any] | None:
    """req/s of each read on each edgeloom side and on PostGraphile, in alternating rounds."""
    if ensure_postgraphile() is None:
        return None
    conn = await asyncpg.connect(plain_url(bench.db.url))
    try:
        await conn.execute(PEER_SQL)
        if bench.edges:
            await conn.execute(edges.PEER_TABLE)
        limit = await conn.fetchval("SHOW max_connections")
        used = await conn.fetchval("SELECT count(*) FROM pg_stat_activity")
        say(f"peer: {used} of {limit} connections in use before PostGraphile starts")
    finally:
        await conn.close()
    out: dict[str, Any] = {}
    seconds = bench.args.duration
    log_dir = Path(tempfile.mkdtemp(prefix="edgeloom-bench-peer-"))
    async with postgraphile(bench.db.url, log_dir) as theirs:
        client = "wrk" if shutil.which("wrk") else "python"
        say(f"peer: PostGraphile 4 at {theirs}; {client} client, {CONNECTIONS} connections")
        for work in await workloads(bench):
            for url in sides.values():
                await check_same(url, theirs, work)
            say(f"peer: {work.name}: both sides return the same records")
            runs: dict[str, list[float]] = {name: [] for name in [*sides, "postgraphile"]}
            everyone: list[tuple[str, str, list[str]]] = [
                *[(name, url, work.ours) for name, url in sides.items()],
                ("postgraphile", theirs, work.theirs),
            ]
            for side in everyone:  # warm-up: plans, prepared statements, caches
                await drive(side[1], side[2], min(2.0, seconds))
            for n in range(bench.args.rounds):
                order = everyone if n % 2 == 0 else list(reversed(everyone))
                for name, url, bodies in order:
                    rate = await drive(url, bodies, seconds)
                    runs[name].append(rate)
                    say(f"  {work.name} round {n + 1} {name}: {rate:,.0f} req/s")
            out[work.name] = runs
    shutil.rmtree(log_dir, ignore_errors=True)
    return out


# The reads whose count the gateway maintains answer it without counting, so they are held to
# more than parity.
TARGETS = {RECORDS_COUNT_NAME: 3.0}


def rows(peer: dict[str, Any], at: str, row: Callable[..., Any]) -> list[Any]:
    out = []
    for name, runs in peer.items():
        target = TARGETS.get(name, 1.0)
        theirs = median(runs["postgraphile"])
        for side, rates in runs.items():
            if side == "postgraphile":
                continue
            ours = median(rates)
            out.append(
                row(
                    f"{name}, {side} {at}",
                    ours,
                    theirs,
                    ours / theirs,
                    f">={target:.1f}",
                    ours / theirs >= target,
                    unit="peer",
                )
            )
    return out
