"""bench.intake runs end to end on a tiny folder (a smoke run, not a measurement)."""

from __future__ import annotations

from pathlib import Path

from bench.intake import measure, walk_hub
from tests.support import Databases


async def test_bench_intake_runs_on_a_tiny_folder(databases: Databases, tmp_path: Path) -> None:
    figures = await measure(await databases.create(), tmp_path / "notes", 30)
    assert figures["notes"] == 30 and figures["changed"] == 1
    assert figures["records"] > 30


async def test_bench_intake_walks_from_the_hub_of_a_tiny_vault(
    databases: Databases, tmp_path: Path
) -> None:
    figures = await walk_hub(await databases.create(), tmp_path / "vault", 30, 2)
    assert figures["notes"] == 30 and figures["hub_links"] > 1
    assert figures["note_listed"] > 0 and figures["section_listed"] > 0
