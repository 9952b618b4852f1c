"""Folder intake speed: a first intake, a re-run with nothing changed, one with 1% changed,
one after every file's time moved (a checkout), and the run after it; with --vault, the
first intake of a vault shaped like a real one and the walk from its hub note.

    .venv/bin/python -m bench.intake                 # 2,000 notes
    .venv/bin/python -m bench.intake --notes 200
    .venv/bin/python -m bench.intake --vault         # 2,000 notes shaped like a vault

Writes N generated Markdown notes into a temporary folder (ten subfolders, numbered
names, two to four headings each, wikilinks with and without aliases and headings,
relative Markdown links, some links to notes that do not exist) and runs intake on it
five times through the real write path (`store.intake.run.Intake`, the executor, one
transaction per file), as `edgeloom intake` does. With DATABASE_URL unset it runs on
an embedded PostgreSQL in a temporary folder.

With --vault it writes `bench.vault`'s vault instead (Zipf link targets, sections,
tables, attachments, frontmatter), runs one intake, and times `traverse` depth 2 (the
store's own read, every label) from the most linked note's record and from its first
section (`--limit` records listed at most, 100 as the API's default), `--walks` times each
after one untimed walk: p50 and p90.
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
from bench.vault import WORDS as VAULT_WORDS
from bench.vault import write_vault
from policies.loader import DEV_POLICY_YAML
from store.database import open_database
from store.intake.report import IntakeReport
from store.intake.run import Intake
from store.intake.sources import FolderSource
from store.kinds.policy import in_force as policy_store
from store.kinds.policy.commands import ApplyPolicy
from store.kinds.policy.in_force import PolicyCache
from store.kinds.record import queries, traverse
from store.kinds.record.model import Record
from store.kinds.record.reads import gather as gather_read
from store.ledger.executor import Executor
from store.pool import create_pool
from store.reads.snapshot import Snapshot

# The plain notes draw from the first twelve of the vault's words, as they always have.
WORDS = VAULT_WORDS[:12]


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


def _offset(record: Record) -> str | None:
    # A section's offset: its metadata (or, as an earlier build wrote it, its property).
    held = {p.label: p.value for p in record.state.properties}
    return held.get("e_meta_offset", held.get("offset"))


def _quantile(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def walk_hub(
    url: str, folder: Path, notes: int, walks: int, limit: int = 100
) -> dict[str, float]:
    """A vault's first intake, then `traverse` depth 2 from its hub note's record and
    from its first section (the database at `url` must be migrated and empty)."""
    pool = await create_pool(url, 1)
    cache = PolicyCache.empty()
    await Executor(pool, cache).execute(
        "operator", ApplyPolicy(DEV_POLICY_YAML, "bench", None, cache)
    )
    await pool.close()
    folder.mkdir(parents=True, exist_ok=True)
    vault = write_vault(folder, notes)
    first = await intake_once(url, folder)
    assert not first.report.refused, first.report.summary()
    pool = await create_pool(url, 2)
    db = Snapshot(pool)
    lanes = ["default"]
    figures: dict[str, float] = {
        "notes": notes,
        "records": first.report.records_written,
        "first_s": first.seconds,
        "hub_links": vault.linked[vault.hub],
    }
    try:
        union = queries.GatherMode.UNION
        [note] = (
            await gather_read.gather(db, [f"path:{vault.hub}"], union, lanes, None, 1, None)
        ).items
        [record] = (await queries.records_by_id(db, [note], lanes)).values()
        file_id = next(p.value for p in record.state.properties if p.label == "file_id")
        match = [f"file_id:{file_id}"]
        members = (await gather_read.gather(db, match, union, lanes, None, 100, None)).items
        found = await queries.records_by_id(db, members, lanes)
        [section] = [i for i, r in found.items() if _offset(r) == "0"]
        for name, start in (("note", note), ("section", section)):
            await traverse.traverse(db, start, lanes, depth=2, limit=limit)
            times = []
            for _ in range(walks):
                began = time.perf_counter()
                walked = await traverse.traverse(db, start, lanes, depth=2, limit=limit)
                times.append(time.perf_counter() - began)
            figures[f"{name}_p50_ms"] = _quantile(times, 0.5) * 1000
            figures[f"{name}_p90_ms"] = _quantile(times, 0.9) * 1000
            figures[f"{name}_listed"] = len(walked.steps)
            figures[f"{name}_not_shown"] = walked.not_shown
    finally:
        await db.close()
        await pool.close()
    return figures


async def main(notes: int, vault: bool, walks: int, limit: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="edgeloom-bench-intake-"))
    admin = os.environ.get("DATABASE_URL") or open_database(scratch / "pgdata").url
    url = await database(admin, f"edgeloom_bench_intake_{uuid.uuid4().hex[:8]}")
    if vault:
        w = await walk_hub(url, scratch / "vault", notes, walks, limit)
        print(
            f"{w['notes']:,.0f}-note vault ({w['records']:,.0f} records): first intake "
            f"{w['first_s']:.1f} s; traverse depth 2 from the hub note "
            f"({w['hub_links']:.0f} links to it), limit {limit}, {walks} walks: "
            f"from its record p50 "
            f"{w['note_p50_ms']:.1f} ms, p90 {w['note_p90_ms']:.1f} ms ({w['note_listed']:.0f} "
            f"listed, {w['note_not_shown']:.0f} not shown); from its first section p50 "
            f"{w['section_p50_ms']:.1f} ms, p90 {w['section_p90_ms']:.1f} ms "
            f"({w['section_listed']:.0f} listed, {w['section_not_shown']:.0f} not shown)"
        )
        return
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
    parser.add_argument(
        "--vault", action="store_true", help="a vault shaped like a real one, and its hub walk"
    )
    parser.add_argument("--walks", type=int, default=50, help="timed walks from each start")
    parser.add_argument("--limit", type=int, default=100, help="the walk's limit (1 to 1000)")
    args = parser.parse_args()
    asyncio.run(main(args.notes, args.vault, args.walks, args.limit))
