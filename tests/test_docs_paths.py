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
MADE = {
    "bench/.node",
    "bench/results/run.json",
    "bench/results/embeddings",  # bench.relevance's cache of vectors
    "bench/results/relevance",  # its JSON, relevance-<split>-<setting>.json
}
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


LINK = re.compile(r"\]\(([^)\s]+)\)")


def links(text: str) -> list[str]:
    """The link targets of a page's text, leaving out code (where a link is an example)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return LINK.findall(re.sub(r"`[^`\n]*`", "", prose))


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces
    as hyphens."""
    headings = re.findall(
        r"^#{1,6} (.+)$", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S), re.M
    )
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


LINKS = [
    (page.relative_to(REPO).as_posix(), target)
    for page in PAGES
    for target in links(page.read_text(encoding="utf-8"))
    if not target.startswith(("http://", "https://"))
]


@pytest.mark.parametrize(("page", "target"), LINKS, ids=[f"{p}:{t}" for p, t in LINKS])
def test_each_link_reaches_its_page_and_heading(page: str, target: str) -> None:
    path, _, anchor = target.partition("#")
    linked = (REPO / page).parent / path if path else REPO / page
    assert linked.exists(), f"{page} links to {path}, which does not exist"
    if anchor:
        assert anchor in anchors(linked.read_text(encoding="utf-8")), f"{page}: no #{anchor}"


def test_every_docs_page_is_reached_from_the_readme() -> None:
    """A reader who starts at the README and follows links finds every page of docs/."""
    reached, todo = set(), [REPO / "README.md"]
    while todo:
        page = todo.pop()
        for target in links(page.read_text(encoding="utf-8")):
            path = (page.parent / target.partition("#")[0]).resolve()
            if path.suffix == ".md" and path.exists() and path not in reached:
                reached.add(path)
                todo.append(path)
    assert sorted(set((REPO / "docs").glob("*.md")) - reached) == []


CITED = re.compile(
    r'bench/README\.md`?,? ((?:"[^"]+"(?:,| and)? ?)+)|"([^"]+)" in `bench/README\.md`'
)
SOURCES = [
    *PAGES,
    *(
        p
        for package in ("gql", "store", "policies", "bench")
        for p in (REPO / package).rglob("*.py")
    ),
]


def cited_sections() -> list[tuple[str, str]]:
    found = set()
    for source in SOURCES:
        text = re.sub(r"\s*\n\s*(?:#\s*)?", " ", source.read_text(encoding="utf-8"))
        for match in CITED.finditer(text):
            for title in re.findall(r'"([^"]+)"', match[1] or f'"{match[2]}"'):
                found.add((source.relative_to(REPO).as_posix(), title))
    return sorted(found)


SECTIONS = cited_sections()


def test_pages_and_code_cite_bench_sections() -> None:
    assert len(SECTIONS) >= 8


@pytest.mark.parametrize(("source", "title"), SECTIONS, ids=[f"{s}:{t}" for s, t in SECTIONS])
def test_each_cited_bench_section_is_in_bench_readme(source: str, title: str) -> None:
    headings = re.findall(r"^#+ (.+)$", (REPO / "bench" / "README.md").read_text(), re.M)
    assert any(h.startswith(title) for h in headings), f"{source} cites {title!r}"


LAYOUT_ROW = re.compile(r"^\| `([\w/]+/)` \| (.*) \|$", re.M)
LAYOUT = sorted(
    {
        (folder, name)
        for folder, text in LAYOUT_ROW.findall((REPO / "docs" / "architecture.md").read_text())
        for name in re.findall(r"`(\w+\.py|\w+/)`", text)
    }
)


@pytest.mark.parametrize(("folder", "name"), LAYOUT, ids=[f"{f}{n}" for f, n in LAYOUT])
def test_each_module_of_the_layout_table_is_in_its_folder(folder: str, name: str) -> None:
    """A module or folder a row of the layout names by itself lives in that row's folder."""
    assert list((REPO / folder).rglob(name.rstrip("/"))), f"no {name} in {folder}"
