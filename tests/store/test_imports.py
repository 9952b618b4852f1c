"""store's folders import one way: no folder imports one above it, so the reads every path
shares (`store/reads/`) name no kind, and the ledger names no kind either."""

from __future__ import annotations

import ast
from pathlib import Path

import store

ROOT = Path(store.__file__).parent
# The folders of store, lowest first ("" is the modules at its top: tables, pool, ids...).
FLOORS = ("", "reads", "ledger", "kinds", "feed", "intake", "operations", "migrations")


def _floor(module: str) -> int | None:
    parts = module.split(".")
    folder = parts[1] if len(parts) > 2 else ""
    return FLOORS.index(folder) if folder in FLOORS else None


def test_store_folders_import_only_the_ones_below() -> None:
    up = set()
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            used = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                used = [node.module]
            elif isinstance(node, ast.Import):
                used = [a.name for a in node.names]
            for other in used:
                if not other.startswith("store."):
                    continue
                mine, theirs = _floor(name), _floor(other)
                if mine is not None and theirs is not None and theirs > mine:
                    up.add((name, other))
    assert up == set()
    # The generic compiler of reads is among what is checked.
    assert (ROOT / "reads" / "compiled_sql.py").exists()
