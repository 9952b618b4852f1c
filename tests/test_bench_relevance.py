"""`python -m bench.relevance` runs end to end on a slice of FriendsQA (not a measurement).

The data is read where it is staged (`../shared/data/relevance`, never copied here): the
tests skip, saying why, where it is absent. The suite's lock has bm25s; the model of the
vector methods comes with the `bench` extra (EXTRAS=bench), and their test skips without it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bench import embed, friendsqa
from bench.relevance import PGVECTOR
from tests.support import Databases, plain

REPO = Path(__file__).resolve().parent.parent
TEXT = ["edgeloom text, default policy", "edgeloom text, lane text_search: english"]
VECTORS = [
    "edgeloom vectors (all-MiniLM-L6-v2 int8, 384-d)",
    "edgeloom hybrid (default text + vectors)",
]
BM25S = "bm25s (Lucene BM25, English stop words, Snowball stemmer)"
RANDOM = "random order (the floor)"


def _needs_data() -> None:
    if friendsqa.data_dir() is None:
        pytest.skip(f"no ../shared/data/relevance beside the repository (nor {friendsqa.ENV})")
    for module in ("bm25s", "Stemmer"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed: the test extra has it")


async def _relevance(
    databases: Databases, tmp_path: Path, *args: str
) -> tuple[dict[str, Any], list[str]]:
    """The bench's figures and its printed table's lines."""
    out = tmp_path / "relevance.json"
    # A database of the suite's migrated template: the gateways start without migrating.
    database = await databases.create()
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bench.relevance", "--split", "dev", *args]
        + ["--database", database, "--json", str(out)],
        cwd=REPO,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "EDGELOOM_READ_POOL_SIZE": "4",
            "EDGELOOM_ENGINE_POOL_SIZE": "2",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("|")]
    return json.loads(out.read_text()), rows


def _check_shape(results: dict[str, Any], rows: list[str], methods: list[str], asked: int) -> None:
    assert list(results["methods"]) == methods
    for name, m in results["methods"].items():
        assert m["questions"] == asked, name
        assert 0 <= m["recall@5"] <= m["recall@10"] <= m["recall@20"] <= 1, name
        assert 0 <= m["mrr"] <= 1 and 0 <= m["no_hit"] <= 1, name
    # The printed table: a header, its rule and one row a method, each of as many cells.
    assert rows[0].startswith("| method | recall@5 | recall@10 | recall@20 |")
    assert len(rows) == 2 + len(methods)
    assert all(line.count("|") == rows[0].count("|") for line in rows)
    assert all(row.startswith(f"| {name} |") for row, name in zip(rows[2:], methods, strict=True))


@pytest.mark.over10s("two gateways start, each given the dev split's 2,847 utterances")
async def test_relevance_text_and_bm25s_on_a_slice(databases: Databases, tmp_path: Path) -> None:
    _needs_data()
    results, rows = await _relevance(databases, tmp_path, "--limit", "40", "--no-vectors")
    _check_shape(results, rows, [*TEXT, BM25S, RANDOM], 40)
    assert results["passages"] == 2847
    bm25 = results["methods"][BM25S]
    assert bm25["recall@10"] > 0.2, bm25
    assert bm25["no_hit"] < 0.1, bm25
    # Ranked, not only scoped: above the scene's utterances in a random order.
    assert bm25["mrr"] > results["methods"][RANDOM]["mrr"], results["methods"]


@pytest.mark.over10s("two gateways start; the model loads")
async def test_relevance_vectors_on_their_scenes(databases: Databases, tmp_path: Path) -> None:
    _needs_data()
    if (reason := embed.missing()) is not None:
        pytest.skip(f"vectors: {reason}")
    conn = await asyncpg.connect(plain(databases.url))
    try:
        if not await conn.fetchval(PGVECTOR):
            pytest.skip("vectors: this server has no pgvector")
    finally:
        await conn.close()
    results, rows = await _relevance(databases, tmp_path, "--limit", "10", "--their-scenes")
    assert results["vectors"] == "on"
    _check_shape(results, rows, [*TEXT, *VECTORS, BM25S, RANDOM], 10)
    # Scoped to a scene of a few dozen turns, the nearest 20 hold most of the evidence.
    assert results["methods"][VECTORS[0]]["recall@20"] > 0.5
