"""Every bench command the READMEs give runs end to end on a tiny load (not a measurement).

The default suite runs each in seconds, so a bench that no longer runs fails CI; the
`slow` test runs `bench.run` with PostGraphile beside it as its README gives it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from tests.support import Databases

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server(databases: Databases) -> str:
    """The suite's server: a bench given it makes its database there rather than starting
    an embedded server of its own (initdb, start, restart: seconds each)."""
    return databases.url


def _bench(
    *args: str, server: str | None = None, timeout: float = 300, embedded: bool = False
) -> str:
    # A subprocess: each bench runs its own event loop (and its own gateways, servers).
    # The gateways a bench serves open small pools: beside the other worker's tests they
    # stay within a shared server's max_connections (scripts/test runs two workers there).
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "EDGELOOM_READ_POOL_SIZE": "4",
        "EDGELOOM_ENGINE_POOL_SIZE": "2",
    }
    if server is not None:
        env["DATABASE_URL"] = server
    if embedded:  # its own embedded server, whatever server the suite runs on
        env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    return done.stdout


@pytest.mark.over10s("bench.run end to end: a load, then each read and write against raw SQL")
def test_bench_run_on_a_tiny_load(server: str, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    stdout = _bench(
        "bench.run",
        *("--records", "1000", "--duration", "1", "--rounds", "1", "--queries", "10"),
        *("--clients", "2", "--many-clients", "1", "--load-clients", "1", "--skip-peer"),
        *("--edges", "200", "--vectors", "300", "--json", str(out)),
        server=server,
    )
    assert "gather zipf INTERSECT p50" in stdout
    assert "gather zipf asOf p50 ms (vs now)" in stdout
    # The largest value's page and memberCount, one statement the raw side replays.
    assert "gather largest one property p50 ms" in stdout
    for search in ("search rare word (", "search common word, match (", "search phrase asOf p50"):
        assert search in stdout, stdout
    for read in ("edges(fromId, first: 20)", "related(id)", "conflicts(first: 20)"):
        assert f"{read}" in stdout, stdout
    results = json.loads(out.read_text())
    # The vector rows, on a database of their own, where the server has pgvector.
    if results["vectors"]["pgvector"]:
        assert "search(vector, match 1%) 384-dim recall@10 @300" in stdout, stdout
    [stage] = results["stages"]
    assert stage["records"] >= 1000
    largest = stage["gather"]["largest"]
    assert largest["shared_members"]["min"] == largest["shared_members"]["max"] > 10
    assert min(largest["gateway_p50_ms"]) > 0 and min(largest["raw_p50_ms"]) > 0
    # Typed edges through upsertEdge, some retired, some contradictions left unresolved.
    loaded = stage["edges_load"]
    assert loaded["edges"] >= 180 and loaded["retired"] > 0
    assert loaded["contradicts"] > loaded["resolved"] > 0
    for read in stage["edges"].values():
        # Every call ran on the compiled path (the run fails otherwise), against raw.
        assert read["compiled"] == read["calls"] > 0
        assert min(read["gateway_p50_ms"]) > 0 and min(read["raw_p50_ms"]) > 0
    for key in ("ingest", "ingest_many"):
        assert min(stage[key]["gateway_records_per_s"]) > 0


def test_bench_traverse_on_a_tiny_load() -> None:
    # On a server of its own, as the README runs a bench without DATABASE_URL.
    stdout = _bench("bench.traverse", "--records", "1500", "--starts", "5", "--shape", "crm")
    states = stdout.split("-- after ANALYZE")
    assert len(states) == 2, stdout
    assert "-- right after the load (the write path's upkeep only)" in states[0], stdout
    # What the upkeep had done to the hop's tables by then, in each state.
    assert all("records: " in state and "pages all-visible" in state for state in states), stdout
    for state in states:
        for figure in (
            "traverse depth 2 limit 100 (",
            "traverse depth 2 limit 1000 (",
            "traverse limit 100 + its records (",
            "labels (",
        ):
            assert figure in state, stdout
        assert "hop plan scans: [" in state


def test_bench_backup_on_a_tiny_load(server: str) -> None:
    stdout = _bench("bench.backup", "--records", "1000", server=server)
    assert "verify on the copy: ok" in stdout, stdout
    assert "entries/s" in stdout


@pytest.mark.over10s("bench.feed end to end: gateways, subscriber processes and a timed round")
def test_bench_feed_on_a_tiny_load(server: str) -> None:
    stdout = _bench(
        "bench.feed",
        *("--duration", "1", "--subscribers", "4", "--replicas", "1", "--writers", "1"),
        *("--rounds", "1", "--subscriber-processes", "1"),
        server=server,
    )
    assert "duplicates / unexpected / resumes                 0 / 0 / 0" in stdout, stdout
    assert "delivered / expected per subscriber (min, max)    1.000, 1.000" in stdout, stdout


@pytest.mark.over10s("bench.feed --scale end to end: two subscriber processes, a timed round")
def test_bench_feed_scale_on_a_tiny_load(server: str) -> None:
    stdout = _bench(
        "bench.feed",
        *("--scale", "--subscribers", "30", "--groups", "2", "--own", "10"),
        *("--duration", "2", "--subscriber-processes", "2"),
        server=server,
    )
    assert "duplicates / unexpected / resumes                      0 / 0 / 0" in stdout, stdout
    assert "delivered / expected per subscriber (min, max)         1.000, 1.000" in stdout, stdout
    assert "serving gateway CPU per delivery" in stdout, stdout


@pytest.mark.slow
def test_bench_runs_on_a_tiny_load(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    _bench(
        "bench.run",
        *("--records", "2000", "--duration", "2", "--rounds", "1", "--queries", "20"),
        *("--json", str(out)),
        timeout=600,
    )
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
        # Against PostGraphile: the eight reads (five of records and edge properties, three
        # of typed edges on its idiomatic copy), for one and for two gateway workers.
        peer = [r for r in results["rows"] if r["unit"] == "peer"]
        assert len(peer) == 16, peer
        assert any(r["metric"].startswith("related(id)") for r in peer)
        assert all(r["gateway"] > 0 and r["raw"] > 0 for r in peer)


def test_bench_replicas_on_a_tiny_load() -> None:
    stdout = _bench("bench.replicas", "--records", "200", "--clients", "2", "--duration", "1")
    assert "reads/s primary + 1 standby" in stdout, stdout
    assert "reads served by the standby          100%" in stdout, stdout


@pytest.mark.over10s(
    "bench.ab end to end: a worktree of the base commit, three gateways, wrk on each"
)
def test_bench_ab_of_this_build_against_its_own_commit() -> None:
    """`bench.ab` drives each build with wrk (Debian's; .ci/run installs it and requires it)."""
    if shutil.which("wrk") is None:
        if os.environ.get("EDGELOOM_REQUIRE_WRK"):
            pytest.fail("EDGELOOM_REQUIRE_WRK is set but wrk is not installed")
        pytest.skip("no wrk on this machine (CI installs Debian's wrk)")
    stdout = _bench(
        "bench.ab",
        # A 500-record call answers in about half a second, over 3 s on a busy machine.
        *("--base", "HEAD", "--rounds", "1", "--seconds", "6"),
        # Every workload is driven by the same code; the batched one is the slowest to answer.
        *("--workloads", "ingestMany"),
    )
    for workload in ("ingestMany",):
        medians = [
            line
            for line in stdout.splitlines()
            if line.startswith(f"{workload} ") and "median" in line
        ]
        assert len(medians) == 3, stdout  # the base, this build logging, this build quiet


@pytest.mark.over10s("bench.vectors end to end: a load with vectors, the index, each search")
def test_bench_vectors_on_a_tiny_load(server: str) -> None:
    # Its own embedded server where the suite's has no pgvector (the system one here).
    pgvector = asyncio.run(_offers_pgvector(server))
    stdout = _bench(
        "bench.vectors",
        *("--records", "300", "--queries", "3", "--rounds", "1", "--clients", "1"),
        server=server if pgvector else None,
        embedded=not pgvector,
    )
    assert "search(vector) 384-dim recall@10 @300" in stdout
    assert "search(vector, match 10%) p50 ms, " in stdout
    assert "search(vector) asOf p50 ms (vs now) @300" in stdout


async def _offers_pgvector(url: str) -> bool:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        return bool(
            await conn.fetchval(
                "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
            )
        )
    finally:
        await conn.close()


@pytest.mark.over10s("bench.vectors_isolation end to end: three index designs, a cluster beside")
def test_bench_vectors_isolation_on_a_tiny_load(server: str) -> None:
    pgvector = asyncio.run(_offers_pgvector(server))
    stdout = _bench(
        "bench.vectors_isolation",
        *("--records", "300", "--cluster", "50", "--queries", "3", "--rounds", "1"),
        *("--exact-records", "400"),
        server=server if pgvector else None,
        embedded=not pgvector,
    )
    assert "recall@10, one index per lane @300 + 50 hidden" in stdout
    assert "p50 ms, exact scan of one lane @400" in stdout
