"""Every file, folder and module the README, `docs/*.md` and `bench/README.md` name exists,
so a page follows the code when a module moves."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.docs_pages import pages
from tests.support import REPO

PATH = re.compile(r"\b(?:gql|store|policies|tests|bench|scripts|docs|\.ci)/[\w./-]*\w")
MODULE = re.compile(r"`((?:gql|store|policies|bench)\.[a-z_][\w.]*)`")
# What a command makes: npm's folder for PostGraphile, a bench's JSON output.
MADE = {"bench/.node", "bench/results/run.json"}
PAGES = pages()


def named(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    found = set()
    for page in PAGES:
        name = page.relative_to(REPO).as_posix()
        for match in pattern.finditer(page.read_text(encoding="utf-8")):
            found.add((name, match[1] if pattern.groups else match[0]))
    return sorted(found)


PATHS = [(page, path) for page, path in named(PATH) if path not in MADE]
MODULES = named(MODULE)


def test_the_pages_name_paths_and_modules() -> None:
    assert len(PATHS) > 50 and len(MODULES) > 5


@pytest.mark.parametrize(("page", "path"), PATHS, ids=[f"{p}:{q}" for p, q in PATHS])
def test_each_path_exists(page: str, path: str) -> None:
    assert (REPO / path).exists(), f"{page} names {path}, which does not exist"


@pytest.mark.parametrize(("page", "dotted"), MODULES, ids=[f"{p}:{d}" for p, d in MODULES])
def test_each_module_exists(page: str, dotted: str) -> None:
    """The longest prefix that imports is a module, and the rest are its attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            assert hasattr(found, attribute), f"{page} names {dotted}: no {attribute}"
            found = getattr(found, attribute)
        return
    pytest.fail(f"{page} names {dotted}, which does not import")
