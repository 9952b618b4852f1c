"""Folder intake speed: a first intake, a re-run with nothing changed, one with 1% changed,
one after every file's time moved (a checkout), and the run after it.

    .venv/bin/python -m bench.intake                 # 2,000 notes
    .venv/bin/python -m bench.intake --notes 200

Writes N generated Markdown notes into a temporary folder (ten subfolders, numbered
names, two to four headings each, wikilinks with and without aliases and headings,
relative Markdown links, some links to notes that do not exist) and runs intake on it
five times through the real write path (`store.intake.run.Intake`, the executor, one
transaction per file), as `edgeloom intake` does. With DATABASE_URL unset it runs on
an embedded PostgreSQL in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench.backup import database
from policies.loader import DEV_POLICY_YAML
from store.database import open_database
from store.intake.report import IntakeReport
from store.intake.run import Intake
from store.intake.sources import FolderSource
from store.kinds.policy import in_force as policy_store
from store.kinds.policy.commands import ApplyPolicy
from store.kinds.policy.in_force import PolicyCache
from store.ledger.executor import Executor
from store.pool import create_pool
from store.reads.snapshot import Snapshot

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "service",
    "runbook",
    "deploy",
    "rollback",
    "metric",
    "alert",
    "owner",
    "plan",
]


def note_path(n: int) -> str:
    return f"area-{n % 10}/{n:04d}-note.md"


def write_notes(folder: Path, notes: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for n in range(notes):
        path = folder / note_path(n)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(note(rng, n, notes), encoding="utf-8")


def note(rng: random.Random, n: int, notes: int) -> str:
    lines = [f"# Note {n}", " ".join(rng.choices(WORDS, k=30)) + f" #{rng.choice(WORDS)}"]
    for s in range(rng.randint(2, 4)):
        other = rng.randrange(notes)
        lines += [
            f"## Section {s}",
            " ".join(rng.choices(WORDS, k=40)),
            f"See [[{other:04d}-note]] and [[Note {rng.randrange(notes)}|that note]] and "
            f"[[{other:04d}-note#Section 1]].",
            f"Also [the other](../area-{other % 10}/{other:04d}-note.md).",
        ]
        if rng.random() < 0.05:
            lines.append(f"A link to [[missing-{n}-{s}]].")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Timed:
    seconds: float
    report: IntakeReport


async def intake_once(url: str, folder: Path) -> Timed:
    pool = await create_pool(url, 4)
    try:
        cache = PolicyCache.empty()
        in_force = await policy_store.current(pool, cache)
        assert in_force is not None
        executor = Executor(pool, cache)
        snapshot = Snapshot(pool)
        started = time.perf_counter()
        try:
            report = await Intake(
                FolderSource(folder),
                "default",
                "bench",
                "dev",
                in_force,
                snapshot,
                lambda command: executor.execute("dev", command),
            ).run()
        finally:
            await snapshot.close()
        return Timed(time.perf_counter() - started, report)
    finally:
        await pool.close()


async def measure(url: str, folder: Path, notes: int) -> dict[str, float]:
    """The three runs' figures (the database at `url` must be migrated and empty)."""
    pool = await create_pool(url, 1)
    cache = PolicyCache.empty()
    await Executor(pool, cache).execute(
        "operator", ApplyPolicy(DEV_POLICY_YAML, "bench", None, cache)
    )
    await pool.close()
    write_notes(folder, notes)
    first = await intake_once(url, folder)
    assert len(first.report.created) == notes, first.report.summary()
    same = await intake_once(url, folder)
    assert same.report.records_written == 0 and same.report.not_read == notes
    changed = max(1, notes // 100)
    for n in range(0, notes, max(1, notes // changed))[:changed]:
        path = folder / note_path(n)
        path.write_text(path.read_text(encoding="utf-8") + "\nEdited.\n", encoding="utf-8")
    edited = await intake_once(url, folder)
    assert len(edited.report.changed) == changed, edited.report.summary()
    # A checkout: every file's time moves on, no content changes.
    for path in folder.rglob("*.md"):
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**10))
    touched = await intake_once(url, folder)
    assert touched.report.refreshed == notes, touched.report.summary()
    after = await intake_once(url, folder)
    assert after.report.not_read == notes and after.report.records_written == 0
    return {
        "notes": notes,
        "records": first.report.records_written,
        "first_s": first.seconds,
        "first_files_per_s": notes / first.seconds,
        "unchanged_s": same.seconds,
        "changed": changed,
        "changed_s": edited.seconds,
        "touched_s": touched.seconds,
        "after_touch_s": after.seconds,
    }


async def main(notes: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="edgeloom-bench-intake-"))
    admin = os.environ.get("DATABASE_URL") or open_database(scratch / "pgdata").url
    url = await database(admin, f"edgeloom_bench_intake_{uuid.uuid4().hex[:8]}")
    figures = await measure(url, scratch / "notes", notes)
    print(
        f"{figures['notes']:,} notes ({figures['records']:,} records): first intake "
        f"{figures['first_s']:.1f} s ({figures['first_files_per_s']:.0f} files/s); "
        f"re-run, nothing changed: {figures['unchanged_s']:.2f} s; "
        f"re-run, {figures['changed']} changed: {figures['changed_s']:.2f} s; "
        f"every file touched: {figures['touched_s']:.2f} s; "
        f"the run after: {figures['after_touch_s']:.2f} s"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=2000)
    asyncio.run(main(parser.parse_args().notes))
