"""`bench.feed --scale`: many subscribers on one gateway, each following its own gather.

    .venv/bin/python -m bench.feed --scale                                  # the issue's size
    .venv/bin/python -m bench.feed --scale --subscribers 1000 --duration 20

One gateway process serves every subscriber; the writers write through a second one, so
that the first one's CPU is the feed's alone. The subscribers (lean clients, one socket
each, in processes of their own) are `--groups` groups of identical subscriptions
(`auditEvents(match: ["group:<k>"])`, the same document and variables) plus `--own`
subscribers each with a `match` of its own. Every `--tick` the writer ingests (one
`ingestMany`) records carrying one filter's property each, round robin, so that every
subscriber is sent `--rate` events a second on average.

Reported: delivered / expected per subscriber (min and max: both must be 1.0, with no
duplicate and nothing unexpected), p50 / p99 from the commit (the writer's HTTP answer) to
each delivery, the serving gateway's CPU (utime + stime from /proc) per delivery while the
writers ran, its CPU with every subscriber connected and nothing written (keepalive pings,
polls) and the per-delivery figure net of that, and its memory (VmRSS) per idle subscriber,
connected and subscribed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.follower import Follower
from bench.http import Callers
from bench.measure import percentile, say
from bench.server import BenchDatabase, gateway_process

IDLE_SECONDS = 5.0
FEED = """
subscription($after: String, $m: [String!]) {
  auditEvents(after: $after, match: $m, kinds: ["sr_ingested"]) { cursor recordId }
}
"""
WRITE = "mutation($inputs: [IngestInput!]!) { ingestMany(inputs: $inputs) { id } }"


@dataclass
class Gather(Follower):
    """Follows one `match` filter; each event is filed under its record."""

    DOCUMENT = FEED
    match: str = ""

    def variables(self) -> dict[str, Any]:
        return {"after": self.after, "m": [self.match]}

    def key(self, event: dict[str, Any]) -> str:
        return str(event["recordId"])


async def worker(spec: dict[str, Any]) -> None:
    """The client side, in its own process: connects its followers, then reports."""
    subs = [Gather(spec["url"], spec["after"], match=m) for m in spec["filters"]]
    tasks = []
    for n, sub in enumerate(subs):
        tasks.append(asyncio.create_task(sub.run()))
        if n % 100 == 99:  # under the gateway's cap on connections awaiting connection_init
            await asyncio.wait_for(asyncio.gather(*(s.ready.wait() for s in subs[: n + 1])), 300)
    await asyncio.wait_for(asyncio.gather(*(s.ready.wait() for s in subs)), 300)
    print("ready", flush=True)
    reader = asyncio.StreamReader(limit=2**28)
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    expected: dict[str, list[str]] = json.loads(await reader.readline())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
        set(expected[s.match]) <= set(s.received) for s in subs
    ):
        await asyncio.sleep(0.2)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    report = [
        {"match": s.match, "received": s.received, "dup": s.duplicates, "resumes": s.resumes}
        for s in subs
    ]
    print(json.dumps(report), flush=True)


async def settle(pid: int, idle_share: float = 0.1, limit: float = 600.0) -> float:
    """Seconds until the process `pid` spends under `idle_share` of a core for a second."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    while loop.time() - began < limit:
        before = cpu_seconds(pid)
        await asyncio.sleep(1.0)
        if cpu_seconds(pid) - before < idle_share:
            return loop.time() - began
    raise RuntimeError(f"the serving gateway was still busy after {limit:.0f} s")


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` and its children now running (/proc)."""
    return sum(cpu_times(pid))


def cpu_times(pid: int) -> tuple[float, float]:
    """utime and stime of `pid` and its children now running (/proc): on loopback the
    system time of a write includes the receiving side's TCP work, which a network card
    and the subscriber's machine would do elsewhere."""
    ticks = os.sysconf("SC_CLK_TCK")
    user = system = 0.0
    for p in [pid, *_children(pid)]:
        with open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        user += int(fields[11]) / ticks
        system += int(fields[12]) / ticks
    return user, system


def rss_bytes(pid: int) -> int:
    total = 0
    for p in [pid, *_children(pid)]:
        with open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except OSError:
                continue
    return found


def filters(args: argparse.Namespace) -> list[str]:
    """Each subscriber's match: the groups' members first, then the own filters."""
    grouped = max(0, args.subscribers - args.own)
    return [f"group:g{n % args.groups}" for n in range(grouped)] + [
        f"own:o{n}" for n in range(min(args.own, args.subscribers))
    ]


async def write(caller: Any, wanted: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Ingests round robin over `wanted` at `rate` a second each, for `duration`."""
    per_second = args.rate * len(wanted)
    committed: dict[str, float] = {}
    expected: dict[str, list[str]] = {m: [] for m in wanted}
    started = time.monotonic()
    owed = 0.0
    turn = 0
    while (elapsed := time.monotonic() - started) < args.duration:
        owed = per_second * elapsed - len(committed)
        count = min(int(owed), 500)  # behind (a stalled call): catch up in bounded steps
        if count > 0:
            batch = [wanted[(turn + i) % len(wanted)] for i in range(count)]
            turn += count
            inputs = [{"content": "scale", "properties": [m]} for m in batch]
            made = (await caller.call(WRITE, {"inputs": inputs}))["ingestMany"]
            now = time.time()
            for m, record in zip(batch, made, strict=True):
                committed[record["id"]] = now
                expected[m].append(record["id"])
        await asyncio.sleep(args.tick)
    return {"committed": committed, "expected": expected, "seconds": time.monotonic() - started}


async def main(args: argparse.Namespace) -> int:
    database = await BenchDatabase.create()
    say(f"database: {database.where}")
    try:
        with tempfile.TemporaryDirectory(prefix="edgeloom-feed-scale-") as logs:
            async with (
                gateway_process(database.url, Path(logs)) as serving,
                gateway_process(database.url, Path(logs)) as writing,
            ):
                return await _run(args, database.url, serving, writing)
    finally:
        await database.drop()


async def _run(args: argparse.Namespace, database_url: str, serving: Any, writing: Any) -> int:
    from bench.feed import newest

    start = await newest(database_url)
    pid = serving.process.pid
    await asyncio.sleep(2)
    idle_rss = rss_bytes(pid)
    wanted = filters(args)
    url = serving.url.replace("http", "ws") + "/graphql"
    shares = [wanted[n :: args.subscriber_processes] for n in range(args.subscriber_processes)]
    workers = []
    for share in shares:
        spec = json.dumps({"url": url, "after": start, "filters": share})
        workers.append(
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.feed",
                "--scale-worker",
                spec,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=2**28,
            )
        )
    say(f"connecting {len(wanted)} subscribers in {len(workers)} processes")
    for process in workers:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 600)
        if line.strip() != b"ready":
            raise RuntimeError(f"subscriber process failed: {line!r}")
    # A client cannot tell when its subscription is live (the protocol does not answer a
    # subscribe): wait until the gateway has set up every one (its resume check and empty
    # replay) and is idle, so that the CPU measured below is the deliveries' alone.
    settled = await settle(pid)
    say(f"subscriptions set up; gateway idle after {settled:.1f} s")
    subscribed_rss = rss_bytes(pid)
    # What the gateway spends with every subscriber connected and nothing written (the
    # WebSocket keepalive pings and their pongs, the feed's polls, the token checks).
    idle_before = cpu_seconds(pid)
    await asyncio.sleep(IDLE_SECONDS)
    idle_share = (cpu_seconds(pid) - idle_before) / IDLE_SECONDS
    callers = Callers("lean", "127.0.0.1", [writing.port], 1)
    distinct = sorted(set(wanted))
    say(f"writing {args.rate * len(distinct):.0f} events/s for {args.duration:.0f} s")
    cpu_before = cpu_times(pid)
    try:
        written = await write(callers.items[0], distinct, args)
    finally:
        await callers.close()
    # The deliveries of the last writes land within a second; idle polling after that is
    # not theirs.
    await asyncio.sleep(1.0)
    user, system = (a - b for a, b in zip(cpu_times(pid), cpu_before, strict=True))
    cpu = user + system
    reports: list[dict[str, Any]] = []
    line_out = json.dumps(written["expected"]).encode() + b"\n"
    for process in workers:
        assert process.stdin is not None
        process.stdin.write(line_out)
        await process.stdin.drain()
    for process in workers:
        assert process.stdout is not None
        reports.extend(json.loads(await asyncio.wait_for(process.stdout.readline(), 300)))
        await process.wait()
    committed: dict[str, float] = written["committed"]
    expected: dict[str, list[str]] = written["expected"]
    ratios, delays = [], []
    unexpected = duplicates = resumes = 0
    for r in reports:
        mine = set(expected[r["match"]])
        got = r["received"]
        ratios.append(len(mine & set(got)) / max(1, len(mine)))
        unexpected += len(set(got) - mine)
        duplicates += r["dup"]
        resumes += r["resumes"]
        delays.extend((got[i] - committed[i]) * 1000 for i in mine if i in got)
    deliveries = len(delays)
    us_each = 1e6 / max(1, deliveries)  # a second of CPU, in microseconds a delivery
    rows = [
        (
            "subscribers (groups + own filters) / client processes",
            f"{len(wanted)} ({args.groups} groups + {min(args.own, len(wanted))}) / {len(workers)}",
        ),
        (
            "events written / s (each subscriber's share / s)",
            f"{len(committed) / written['seconds']:.0f} ({args.rate:g})",
        ),
        (
            "deliveries expected / measured",
            f"{sum(len(expected[m]) for m in wanted)} / {deliveries}",
        ),
        ("delivered / expected per subscriber (min, max)", f"{min(ratios):.3f}, {max(ratios):.3f}"),
        ("duplicates / unexpected / resumes", f"{duplicates} / {unexpected} / {resumes}"),
        (
            "commit -> delivery p50 / p99",
            f"{percentile(delays, 0.5):.0f} / {percentile(delays, 0.99):.0f} ms",
        ),
        (
            "serving gateway CPU per delivery (user + system)",
            f"{cpu * us_each:.1f} us ({user * us_each:.1f} + {system * us_each:.1f})",
        ),
        (
            "serving gateway CPU while writing (+1 s)",
            f"{cpu:.1f} s of {written['seconds'] + 1:.0f} s",
        ),
        (
            "serving gateway CPU idle / per delivery net of idle",
            f"{idle_share * 100:.1f}% of a core / "
            f"{(cpu - idle_share * (written['seconds'] + 1)) * us_each:.1f} us",
        ),
        (
            "memory per idle subscriber (VmRSS)",
            f"{(subscribed_rss - idle_rss) / len(wanted) / 1024:.1f} KiB",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print("\n".join(f"{name.ljust(width)}  {value}" for name, value in rows))
    exact = min(ratios) == 1.0 and max(ratios) == 1.0 and duplicates == 0 and unexpected == 0
    return 0 if exact else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", action="store_true", help="the scale mode (bench.feed_scale)")
    parser.add_argument("--groups", type=int, default=20, help="scale: groups of identical ones")
    parser.add_argument("--own", type=int, default=200, help="scale: subscribers with own filters")
    parser.add_argument("--rate", type=float, default=2.0, help="scale: events/s per subscriber")
    parser.add_argument("--tick", type=float, default=0.05, help="scale: seconds between writes")
    parser.add_argument("--scale-worker", help=argparse.SUPPRESS)
