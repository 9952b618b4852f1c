"""The generated client is what ariadne-codegen makes today of `schema.graphql` and the
operations in clients/python/operations: a schema or operation change that was not
followed by `scripts/client` fails here, naming the files that differ."""

from __future__ import annotations

import filecmp
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO

PACKAGE = REPO / "clients" / "python" / "edgeloom_client"


def differences(left: Path, right: Path) -> list[str]:
    """The files under `left` and `right` (recursively) that differ or are in one only."""
    found: list[str] = []

    def walk(compared: filecmp.dircmp[str], where: str) -> None:
        found.extend(where + name for name in compared.left_only + compared.right_only)
        found.extend(where + name for name in compared.diff_files)
        for name, sub in compared.subdirs.items():
            walk(sub, f"{where}{name}/")

    walk(filecmp.dircmp(left, right, ignore=["__pycache__"]), "")
    return sorted(found)


@pytest.mark.over10s("the first run installs ariadne-codegen into .venv-codegen")
def test_the_committed_client_is_generated_from_the_schema(tmp_path: Path) -> None:
    subprocess.run(
        [REPO / "scripts" / "client", "--into", tmp_path], check=True, capture_output=True
    )
    for mode in ("async", "sync"):
        generated = tmp_path / "edgeloom_client" / f"{mode}_client"
        assert not differences(generated, PACKAGE / f"{mode}_client"), (
            f"run scripts/client: {mode}_client differs from what the schema and "
            f"operations generate: {differences(generated, PACKAGE / f'{mode}_client')}"
        )


def test_the_client_covers_the_operations_it_promises() -> None:
    from edgeloom_client import AsyncEdgeloom, Edgeloom

    writes = {"ingest", "ingest_many", "update", "retire_record", "restore_record"}
    reads = {"get_record", "gather", "search", "traverse", "values", "edges", "profile"}
    assert writes | reads <= set(dir(Edgeloom))
    assert writes | reads | {"audit_events", "watch"} <= set(dir(AsyncEdgeloom))
