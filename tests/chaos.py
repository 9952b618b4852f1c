"""The chaos run: writers under crashes, and the proof that nothing acknowledged is lost.

`scripts/chaos` (not part of CI) starts a real `edgeloom serve` on an embedded
PostgreSQL in a temporary folder, on loopback only, and for a bounded time runs
8 writers updating overlapping records with `expectedVersion` and ingestMany
batches, while it `kill -9`s the gateway, `kill -9`s PostgreSQL, restarts with
SIGTERM, and runs `edgeloom verify` and `edgeloom checkpoint` throughout. Then it
checks every acknowledged write against the database and prints the figures; it exits
1 when a write was lost, a batch was partial, verify found a difference, or a
checkpoint was refused.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

EDGELOOM = Path(sys.executable).with_name("edgeloom")
UPDATE = """
mutation($id: ID!, $content: String!, $v: Int!) {
  update(id: $id, content: $content, expectedVersion: $v) { id version }
}"""
READ = "query($id: ID!) { record(id: $id) { version } }"
MANY = "mutation($inputs: [IngestInput!]!) { ingestMany(inputs: $inputs) { id } }"


@dataclass
class Tally:
    updates_acked: list[tuple[str, int, str]] = field(default_factory=list)
    batches_acked: dict[str, list[str]] = field(default_factory=dict)
    batches_sent: set[str] = field(default_factory=set)
    conflicts: int = 0
    failures: int = 0
    verify_clean: int = 0
    verify_unreachable: int = 0
    verify_failed: list[str] = field(default_factory=list)
    checkpoints_taken: int = 0
    checkpoints_unreachable: int = 0
    checkpoints_failed: list[str] = field(default_factory=list)
    recoveries: list[float] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gateway:
    """One `edgeloom serve` process on loopback, over the chaos run's data folder."""

    def __init__(self, data: Path, port: int) -> None:
        self.data, self.port = data, port
        self.url = f"http://127.0.0.1:{port}/graphql"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> float:
        started = time.monotonic()
        self.process = await asyncio.create_subprocess_exec(
            str(EDGELOOM),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data),
            "--log-level",
            "warning",
            env={k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        async with httpx.AsyncClient(timeout=2) as client:
            while time.monotonic() - started < 60:
                try:
                    if (await client.get(self.url.replace("/graphql", "/healthz"))).is_success:
                        return time.monotonic() - started
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError("the gateway did not come back within 60 s")

    async def stop(self, how: signal.Signals) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(how)
            await self.process.wait()


def postmaster_pid(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


async def call(client: httpx.AsyncClient, url: str, query: str, variables: dict[str, Any]) -> Any:
    response = await client.post(url, json={"query": query, "variables": variables})
    body = response.json()
    if response.status_code >= 500:
        raise RuntimeError(f"status {response.status_code}")
    return body


async def updater(gw: Gateway, ids: list[str], tally: Tally, stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        while not stop.is_set():
            rid = random.choice(ids)
            try:
                read = await call(client, gw.url, READ, {"id": rid})
                version = read["data"]["record"]["version"]
                marker = uuid.uuid4().hex
                body = await call(
                    client, gw.url, UPDATE, {"id": rid, "content": marker, "v": version}
                )
            except (httpx.HTTPError, RuntimeError, KeyError, TypeError, ValueError):
                tally.failures += 1
                await asyncio.sleep(0.05)
                continue
            if body.get("errors"):
                if body["errors"][0].get("extensions", {}).get("code") == "CONFLICT":
                    tally.conflicts += 1
                else:
                    tally.failures += 1
                continue
            tally.updates_acked.append((rid, body["data"]["update"]["version"], marker))


async def batcher(gw: Gateway, tally: Tally, stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        while not stop.is_set():
            batch = uuid.uuid4().hex
            tally.batches_sent.add(batch)
            inputs = [
                {"content": f"{batch}:{n}", "properties": [f"batch:{batch}"]} for n in range(50)
            ]
            try:
                body = await call(client, gw.url, MANY, {"inputs": inputs})
            except (httpx.HTTPError, RuntimeError, ValueError):
                tally.failures += 1
                await asyncio.sleep(0.05)
                continue
            if body.get("errors") or not body.get("data"):
                tally.failures += 1
                continue
            tally.batches_acked[batch] = [r["id"] for r in body["data"]["ingestMany"]]


async def edgeloom(command: str, data: Path) -> tuple[int, bytes, bytes]:
    """`edgeloom COMMAND --data-dir DATA` on the embedded server: its exit code and output."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    process = await asyncio.create_subprocess_exec(
        str(EDGELOOM),
        command,
        "--data-dir",
        str(data),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out, err


async def verifier(data: Path, tally: Tally, stop: asyncio.Event) -> None:
    while not stop.is_set():
        code, out, err = await edgeloom("verify", data)
        if code == 0:
            tally.verify_clean += 1
        elif code == 2:
            tally.verify_unreachable += 1  # the database was down at that moment
        else:
            tally.verify_failed.append((out + err).decode()[-2000:])
        await asyncio.sleep(1.0)


async def checkpointer(data: Path, tally: Tally, stop: asyncio.Event) -> None:
    """`edgeloom checkpoint` every second, beside the verifier: each one it takes is a
    chance for verify to meet a checkpoint committing during its run."""
    while not stop.is_set():
        code, out, err = await edgeloom("checkpoint", data)
        if code == 0:
            tally.checkpoints_taken += out.startswith(b"checkpoint ")
        elif code == 2 and b"cannot use the database" in err:
            tally.checkpoints_unreachable += 1
        else:
            tally.checkpoints_failed.append((out + err).decode()[-2000:])
        await asyncio.sleep(1.0)


async def disrupt(gw: Gateway, data: Path, tally: Tally, every: float, stop: asyncio.Event) -> None:
    """kill -9 the gateway, kill -9 PostgreSQL, SIGTERM the gateway, round and round."""
    moves = ["kill gateway", "kill postgres", "sigterm gateway"]
    n = 0
    while not stop.is_set():
        await asyncio.sleep(every)
        if stop.is_set():
            return
        move = moves[n % len(moves)]
        n += 1
        print(f"chaos: {move}", file=sys.stderr)
        if move == "kill postgres":
            pid = postmaster_pid(data)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
            # The gateway cannot restart the server it lost; its successor starts it.
            await gw.stop(signal.SIGKILL)
        else:
            await gw.stop(signal.SIGKILL if move == "kill gateway" else signal.SIGTERM)
        tally.recoveries.append(await gw.start())


async def check(data: Path, tally: Tally) -> dict[str, int]:
    """Every acknowledged write against what the database holds."""
    conn = await asyncpg.connect(host=str(data), user="postgres", database="postgres")
    try:
        entries = {
            (r["object_id"], r["version"]): r["content"]
            for r in await conn.fetch(
                "SELECT object_id, version, state->>'content' AS content FROM ledger "
                "WHERE kind = 'record'"
            )
        }
        found_updates = sum(
            1 for rid, v, marker in tally.updates_acked if entries.get((rid, v)) == marker
        )
        by_batch: dict[str, int] = {}
        for row in await conn.fetch(
            "SELECT split_part(content, ':', 1) AS batch, count(*) AS n FROM records "
            "WHERE content LIKE '%:%' GROUP BY 1"
        ):
            by_batch[row["batch"]] = row["n"]
    finally:
        await conn.close()
    found_batches = sum(1 for b in tally.batches_acked if by_batch.get(b) == 50)
    partial = sum(1 for b in tally.batches_sent if 0 < by_batch.get(b, 0) < 50)
    return {
        "acknowledged updates": len(tally.updates_acked),
        "acknowledged updates found": found_updates,
        "acknowledged batches (50 records each)": len(tally.batches_acked),
        "acknowledged batches found whole": found_batches,
        "partial batches (must be 0)": partial,
        "lost acknowledged writes (must be 0)": len(tally.updates_acked)
        - found_updates
        + (len(tally.batches_acked) - found_batches),
    }


async def run(seconds: float, every: float) -> int:
    folder = Path(tempfile.mkdtemp(prefix="edgeloom-chaos-"))
    data = folder / "pgdata"
    os.environ["EDGELOOM_CHECKPOINT_KEY"] = str(folder / "checkpoint-key.pem")
    gw = Gateway(data, free_port())
    tally = Tally()
    await gw.start()
    async with httpx.AsyncClient(timeout=30) as client:
        seeded = await call(
            client, gw.url, MANY, {"inputs": [{"content": f"seed {n}"} for n in range(16)]}
        )
    ids = [r["id"] for r in seeded["data"]["ingestMany"]]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(updater(gw, ids, tally, stop)) for _ in range(6)]
    tasks += [asyncio.create_task(batcher(gw, tally, stop)) for _ in range(2)]
    tasks.append(asyncio.create_task(verifier(data, tally, stop)))
    tasks.append(asyncio.create_task(checkpointer(data, tally, stop)))
    chaos = asyncio.create_task(disrupt(gw, data, tally, every, stop))
    await asyncio.sleep(seconds)
    stop.set()
    await chaos
    await asyncio.gather(*tasks)
    await gw.stop(signal.SIGTERM)
    await gw.start()  # the server is back: count what it holds
    figures = await check(data, tally)
    final = (await edgeloom("verify", data))[1].decode().strip().splitlines()[-1]
    await gw.stop(signal.SIGTERM)
    figures |= {
        "version conflicts answered (expected under overlap)": tally.conflicts,
        "calls failed during outages (not acknowledged)": tally.failures,
        "verify runs clean": tally.verify_clean,
        "verify runs with the database down": tally.verify_unreachable,
        "verify runs reporting a difference (must be 0)": len(tally.verify_failed),
        "checkpoints taken": tally.checkpoints_taken,
        "checkpoint runs with the database down": tally.checkpoints_unreachable,
        "checkpoint runs refused or failing (must be 0)": len(tally.checkpoints_failed),
    }
    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")
    if tally.recoveries:
        print(
            f"{'time to recover, median / max (s)':<{width}}  "
            f"{statistics.median(tally.recoveries):.2f} / {max(tally.recoveries):.2f}"
        )
    print(f"final {final}")
    for failure in tally.verify_failed[:3] + tally.checkpoints_failed[:3]:
        print(failure)
    bad = (
        figures["partial batches (must be 0)"]
        or figures["lost acknowledged writes (must be 0)"]
        or tally.verify_failed
        or tally.checkpoints_failed
        or not final.startswith("verify ok")
    )
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__)
    parser.add_argument("--seconds", type=float, default=60, help="how long writers run")
    parser.add_argument("--every", type=float, default=6, help="seconds between disruptions")
    args = parser.parse_args()
    return asyncio.run(run(args.seconds, args.every))


if __name__ == "__main__":
    raise SystemExit(main())
