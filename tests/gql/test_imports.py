"""The gateway's modules import one another one way: no module reaches back to itself, and no
folder of gql reaches up to one above it."""

from __future__ import annotations

import ast
from pathlib import Path

import gql

ROOT = Path(gql.__file__).parent


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Each gql module and the gql modules it imports anywhere (at the top or in a function)."""
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for used in sorted(graph[name]):
            found = visit(used, [*path, name])
            if found is not None:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        found = visit(name, [])
        if found is not None:
            return found
    return None


def test_no_gql_module_imports_one_that_imports_it_back() -> None:
    graph = _imports()
    assert "gql.api.types" in graph and "gql.api.context" in graph
    assert _cycle(graph) is None


# The folders of gql, lowest first: each imports only those before it.
FLOORS = ("feed", "api", "mcp", "server", "cli")
# What still reaches up: nothing. The hub writes frames through the outlet the server hands
# it (gql.feed.outlet), and an operation finds its socket in its context.
REACHING_UP: set[tuple[str, str]] = set()


def _floor(module: str) -> int | None:
    parts = module.split(".")
    return FLOORS.index(parts[1]) if len(parts) > 1 and parts[1] in FLOORS else None


def test_gql_folders_import_only_the_ones_below() -> None:
    up = set()
    for name, used in _imports().items():
        for other in used:
            mine, theirs = _floor(name), _floor(other)
            if mine is not None and theirs is not None and theirs > mine:
                up.add((name, other))
    assert up == REACHING_UP
