"""The benchmark runs end to end on a tiny load (only with -m slow; not a measurement)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_bench_runs_on_a_tiny_load(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    # A subprocess: the bench runs its own uvloop and starts its own gateway process.
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--records", "2000", "--duration", "2"]
        + ["--rounds", "1", "--queries", "20", "--json", str(out)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gather zipf INTERSECT p50" in done.stdout
    results = json.loads(out.read_text())
    [stage] = results["stages"]
    assert stage["records"] >= 2000
    assert stage["gather"]["zipf"]["shared_members"]["min"] >= 1
    # The HTTP floor answered the same calls (a failure there fails the run).
    assert min(stage["gather"]["zipf"]["floor_p50_ms"]) > 0
    for key in ("ingest", "ingest_many"):
        assert min(stage[key]["gateway_records_per_s"]) > 0
        assert min(stage[key]["raw_records_per_s"]) > 0
    assert all(p["plan"] for p in stage["gather"]["zipf"]["explain"])
    metrics = {r["metric"].split(" ")[0] for r in results["rows"]}
    assert metrics >= {"ingest", "ingestMany", "gather"}
    if shutil.which("node") and shutil.which("npm"):
        # Against PostGraphile: the four reads, for one and for two gateway workers.
        peer = [r for r in results["rows"] if r["unit"] == "peer"]
        assert len(peer) == 8, peer
        assert all(r["gateway"] > 0 and r["raw"] > 0 for r in peer)
