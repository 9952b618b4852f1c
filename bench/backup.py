"""Export and import speed: ledger entries per second both ways.

    .venv/bin/python -m bench.backup                 # 100,000 records
    .venv/bin/python -m bench.backup --records 20000

Loads N records (the Zipf data of `bench.data`, five properties each, every tenth
record updated once) through the real write path (the executor, 1,000 records per
command), then times `store.operations.export.export` and `store.operations.restore.import_`
into a second, empty database on the same server, checks `verify` on the copy, and prints the rates.
With DATABASE_URL unset it runs on an embedded PostgreSQL in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from bench.data import Generator
from policies.loader import DEV_POLICY_YAML
from store.database import create_engine, open_database
from store.kinds.policy.commands import ApplyPolicy
from store.kinds.policy.in_force import PolicyCache
from store.kinds.record.commands import Ingest, NewRecord, Update
from store.ledger.executor import Executor
from store.operations.export import export
from store.operations.migrate import migrate
from store.operations.restore import import_
from store.operations.verify import verify
from store.pool import create_pool, plain_url


async def database(admin: str, name: str) -> str:
    conn = await asyncpg.connect(plain_url(admin))
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    parts = urlsplit(admin)
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
    engine = create_engine(url, pool_size=1)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()
    return url


async def load(url: str, records: int) -> None:
    pool = await create_pool(url, 4)
    cache = PolicyCache.empty()
    executor = Executor(pool, cache)
    await executor.execute("operator", ApplyPolicy(DEV_POLICY_YAML, "bench", None, cache))
    data = Generator()
    started, written = time.monotonic(), 0
    while written < records:
        batch = [
            NewRecord(str(r["content"]), tuple(r["properties"]))  # type: ignore[arg-type]
            for r in data.records(min(1000, records - written))
        ]
        done = await executor.execute("dev", Ingest(tuple(batch)))
        for record in done[::10]:
            await executor.execute("dev", Update(record.id, content=record.state.content + "!"))
        written += len(batch)
        print(f"\rloaded {written:,}/{records:,}", end="", flush=True)
    print(f"\rloaded {records:,} records in {time.monotonic() - started:.0f} s")
    await pool.close()


async def run(records: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="edgeloom-bench-backup-"))
    admin = os.environ.get("DATABASE_URL") or open_database(folder / "pgdata").url
    tag = uuid.uuid4().hex[:8]
    source = await database(admin, f"edgeloom_bench_src_{tag}")
    target = await database(admin, f"edgeloom_bench_dst_{tag}")
    await load(source, records)
    dump = folder / "memory.jsonl.gz"
    started = time.monotonic()
    exported = await export(source, dump)
    export_s = time.monotonic() - started
    started = time.monotonic()
    await import_(target, dump, None)
    import_s = time.monotonic() - started
    report = await verify(target)
    entries = exported.counts["entry"]
    lines = sum(exported.counts.values())
    print(
        f"{records:,} records: {entries:,} ledger entries, {lines:,} lines, "
        f"{dump.stat().st_size / 1e6:.1f} MB compressed"
    )
    print(f"export  {export_s:6.1f} s  {entries / export_s:8,.0f} entries/s")
    print(
        f"import  {import_s:6.1f} s  {entries / import_s:8,.0f} entries/s "
        "(projections rebuilt, checkpoint taken)"
    )
    print(f"verify on the copy: {'ok' if report.ok else report.problems[:5]}")
    conn = await asyncpg.connect(plain_url(admin))
    try:
        for name in (source, target):
            db = urlsplit(name).path.lstrip("/")
            await conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.backup", description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    asyncio.run(run(parser.parse_args().records))


if __name__ == "__main__":
    main()
