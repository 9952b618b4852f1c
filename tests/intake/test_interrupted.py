"""An interrupted intake (kill -9, Ctrl-C) leaves no half-written file; the next run
completes it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import GatewayFactory
from tests.intake.test_cli_intake import POLICY, intake
from tests.support import EDGELOOM, REPO, sql

FILES = 150


def many(root: Path) -> Path:
    folder = root / "many"
    for n in range(FILES):
        path = folder / f"d{n % 7}" / f"{n:03d}-note.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(
            f"## Section {s}\nText {n}.{s} links [[{(n + 1) % FILES:03d}-note]]\n" for s in range(3)
        )
        path.write_text(f"# Note {n}\n{body}")
    return folder


# Backends of this database still at work, other than the caller's.
BUSY = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND backend_type = 'client backend' AND state <> 'idle'
"""


async def settled(url: str) -> None:
    """Wait until the killed run's last statement is over: a COMMIT it sent before it
    died still completes on the server, after the process is gone."""
    async with sql(url) as conn:
        for _ in range(200):
            if await conn.fetchval(BUSY) == 0:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("a backend of the killed run was still busy after 10 s")


async def whole_files(url: str) -> Counter[str]:
    """Each file record's path, checking that it has every part its record names and
    the edges between them (the sequence of its parts): its records and its edges are
    written in one transaction."""
    # One snapshot for both reads: a file written between them would seem half written.
    async with sql(url) as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        rows = await conn.fetch("SELECT id, content, properties FROM records WHERE lane = 'notes'")
        edges = await conn.fetch(
            "SELECT from_id, to_id FROM edges WHERE detector = 'sequence@1' AND expired_at IS NULL"
        )
    files: dict[str, tuple[str, int]] = {}
    parts: Counter[str] = Counter()
    paths: Counter[str] = Counter()
    of: dict[str, str] = {}
    for row in rows:
        props = dict(json.loads(row["properties"]))
        held = json.loads(row["properties"])
        if any(label == "path" for label, _ in held):
            files[props["file_id"]] = (props["path"], json.loads(row["content"])["parts"])
            paths[props["path"]] += 1
        elif "file_id" in props:
            parts[props["file_id"]] += 1
            of[row["id"]] = props["file_id"]
    chained: Counter[str] = Counter()
    for edge in edges:
        if edge["from_id"] in of and of[edge["from_id"]] == of.get(edge["to_id"]):
            chained[of[edge["from_id"]]] += 1
    for file_id, (path, count) in files.items():
        assert parts[file_id] == count, f"{path}: {parts[file_id]} of {count} parts written"
        assert chained[file_id] == count - 1, f"{path}: {chained[file_id]} of its part edges"
    assert sum(parts.values()) == sum(c for _, c in files.values()), "parts without a file"
    return paths


@pytest.mark.over10s("two intake processes a run: one interrupted midway, one completing it")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
async def test_an_interrupted_run_leaves_whole_files_and_the_next_completes_it(
    start_gateway: GatewayFactory, tmp_path: Path, how: signal.Signals
) -> None:
    gateway = await start_gateway(policy_yaml=POLICY)
    url = gateway.database_url
    folder = many(tmp_path)
    process = await asyncio.create_subprocess_exec(
        str(EDGELOOM),
        "intake",
        str(folder),
        "--lane",
        "notes",
        "--agent",
        "writer",
        env={**os.environ, "DATABASE_URL": url},
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    written = Counter[str]()
    for _ in range(600):
        written = await whole_files(url)
        if len(written) >= 10:
            break
        await asyncio.sleep(0.05)
    process.send_signal(how)
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode != 0, (out, err)
    await settled(url)
    if how == signal.SIGINT:
        assert "Traceback" not in err.decode()
        assert "interrupted" in err.decode()
    stopped = await whole_files(url)
    assert 10 <= len(stopped) < FILES, len(stopped)
    assert set(stopped.values()) == {1}

    status, out_text, err_text = await intake(url, folder)
    assert status == 0, (out_text, err_text)
    done = await whole_files(url)
    assert len(done) == FILES and set(done.values()) == {1}
    assert f"files new: {FILES - len(stopped)}, changed: 0" in out_text
