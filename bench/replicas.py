"""Read throughput with the primary alone and with one hot standby serving the reads.

    .venv/bin/python -m bench.replicas [--records 2000] [--clients 16] [--duration 10]

Builds a real primary and a streaming standby on loopback (`tests.replica_pair`, with the
binaries of the embedded server, or the system server's when DATABASE_URL is set), loads
`--records` records through a gateway, then runs `--clients` callers reading records by
id (the compiled path: one statement each) for `--duration` seconds against a gateway on
the primary alone, and against one with EDGELOOM_READ_URLS at the standby. The gateway
runs in this process, beside its callers: on a small machine the gateway's CPU, not the
database, bounds both figures, and the standby's share says where the reads went.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import time

from bench.http import Callers
from bench.measure import say
from gql.server.settings import Settings
from store.reads.replicas import ReplicaOptions
from tests.replica_pair import Pair, replica_pair
from tests.support import Gateway, run_gateway

READ = "query($id: ID!) { record(id: $id) { id content properties } }"
INGEST_MANY = "mutation($inputs: [IngestInput!]!) { ingestMany(inputs: $inputs) { id } }"


async def _load(gateway: Gateway, records: int) -> list[str]:
    ids: list[str] = []
    while len(ids) < records:
        n = min(500, records - len(ids))
        inputs = [{"content": f"r{len(ids) + i}", "properties": ["topic:bench"]} for i in range(n)]
        data = await gateway.data(INGEST_MANY, {"inputs": inputs})
        ids.extend(r["id"] for r in data["ingestMany"])
    return ids


async def _reads_per_second(
    gateway: Gateway, ids: list[str], clients: int, seconds: float
) -> float:
    port = int(gateway.url.rsplit(":", 1)[1])
    callers = Callers("lean", "127.0.0.1", [port], clients)
    done = 0
    rng = random.Random(1)
    deadline = time.perf_counter() + seconds

    async def call(n: int) -> None:
        nonlocal done
        caller = callers.items[n]
        while time.perf_counter() < deadline:
            await caller.call(READ, {"id": rng.choice(ids)})
            done += 1

    started = time.perf_counter()
    try:
        await asyncio.gather(*(call(n) for n in range(clients)))
    finally:
        await callers.close()
    return done / (time.perf_counter() - started)


def _settings(pair: Pair, standby: bool, clients: int) -> Settings:
    urls = (pair.standby_url.replace("postgres@", "edgeloom_runtime@", 1),) if standby else ()
    return Settings(
        database_url=pair.primary_url,
        anonymous_agent="dev",
        read_pool_size=clients,
        checkpoint_seconds=0,
        replicas=ReplicaOptions(urls=urls, check_seconds=0.2),
    )


async def main(records: int, clients: int, seconds: float) -> None:
    with replica_pair() as pair:
        settings = _settings(pair, False, clients)
        async with run_gateway(settings) as gateway:
            ids = await _load(gateway, records)
            alone = await _reads_per_second(gateway, ids, clients, seconds)
        settings = dataclasses.replace(_settings(pair, True, clients), run_migrations=False)
        async with run_gateway(settings) as gateway:
            services = gateway.state["services"] if gateway.state else None
            assert services is not None and services.replicas is not None
            while not services.replicas.standbys[0].up:
                await asyncio.sleep(0.05)
            before = dict(services.replicas.served)
            with_standby = await _reads_per_second(gateway, ids, clients, seconds)
            served = {k: v - before[k] for k, v in services.replicas.served.items()}
    share = served["standby"] / max(1, sum(served.values()))
    say(f"{records} records, {clients} clients, {seconds:g} s each")
    print(f"reads/s primary alone                {alone:,.0f}")
    print(f"reads/s primary + 1 standby          {with_standby:,.0f}")
    print(f"ratio (with standby / alone)         {with_standby / alone:.2f}")
    print(f"reads served by the standby          {share:.0%}")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=10.0)
    args = parser.parse_args()
    asyncio.run(main(args.records, args.clients, args.duration))


if __name__ == "__main__":
    cli()
