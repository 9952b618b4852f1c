"""bench.intake runs end to end on a tiny folder (a smoke run, not a measurement)."""

from __future__ import annotations

from pathlib import Path

from bench.intake import measure
from tests.support import Databases


async def test_bench_intake_runs_on_a_tiny_folder(databases: Databases, tmp_path: Path) -> None:
    figures = await measure(await databases.create(), tmp_path / "notes", 30)
    assert figures["notes"] == 30 and figures["changed"] == 1
    assert figures["records"] > 30
