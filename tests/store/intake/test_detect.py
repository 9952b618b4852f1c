"""Detectors: links with the line that states them, resolution by path and file name,
structure."""

from __future__ import annotations

from store.intake.detect import (
    MAX_QUOTE_CHARS,
    MDLINK,
    REPEATED,
    SAME_DIR,
    SELF,
    SEQUENCE,
    WIKILINK,
    Edge,
    Ref,
    link_edges,
    links,
    quote,
    structure_edges,
)
from store.intake.parts import split, title_of
from store.intake.resolve import NO_FILE, FileInfo, Resolver, Unresolved

RUNBOOK = """# Runbook
See [[00-overview]] for context.
Then [[Overview|the overview]] and [[00-overview#Goals]].

## Steps
Read [the guide](sub/guide.md#top) and [up](../outside.md) and [web](https://x.org).
![[diagram.png]] `[[in code]]`
```
[[in fence]]
```
Broken [[missing-note]] and [[notes]].
"""
FILES = {
    "00-overview.md": "# Overview\nintro\n# Goals\ngoals\n",
    "01-runbook.md": RUNBOOK,
    "sub/guide.md": "# Guide\nBack to [runbook](../01-runbook.md).\n",
    "sub/notes.md": "# Notes A\n",
    "other/notes.md": "# Notes B\n",
}


def infos() -> list[FileInfo]:
    return [
        FileInfo(p, title_of(p, c), tuple(x.title for x in split(p, c))) for p, c in FILES.items()
    ]


def test_links_are_found_with_their_offset_line_and_quote() -> None:
    found = links("01-runbook.md", RUNBOOK, split("01-runbook.md", RUNBOOK))
    shown = [(f.detector.name, f.target, f.heading, f.line, f.part) for f in found]
    assert shown == [
        ("wikilink", "00-overview", None, 2, 0),
        ("wikilink", "Overview", None, 3, 0),
        ("wikilink", "00-overview", "Goals", 3, 0),
        ("mdlink", "sub/guide.md", "top", 6, 1),
        ("mdlink", "../outside.md", None, 6, 1),
        ("wikilink", "diagram.png", None, 7, 1),
        ("wikilink", "missing-note", None, 11, 1),
        ("wikilink", "notes", None, 11, 1),
    ]
    for f in found:
        # The file at the offset starts with the link's text, and the quote is its line.
        assert RUNBOOK[f.offset :].startswith("[")
        assert f.quote in RUNBOOK and RUNBOOK.splitlines()[f.line - 1].strip() == f.quote
    assert RUNBOOK[found[1].offset :].startswith("[[Overview|the overview]]")
    assert RUNBOOK[found[3].offset :].startswith("[the guide](sub/guide.md#top)")


def test_resolution_is_by_path_and_file_name_and_reports_what_it_cannot_resolve() -> None:
    resolver = Resolver(infos())
    found = links("01-runbook.md", RUNBOOK, split("01-runbook.md", RUNBOOK))
    linked = link_edges("01-runbook.md", found, resolver)
    edges, unresolved = linked.edges, linked.unresolved
    got = {(e.detector.name, e.source, e.target) for e in edges}
    assert got == {
        # By file name, to the heading's part, and of two notes so named the nearest.
        ("wikilink", Ref("01-runbook.md", 0), Ref("00-overview.md")),
        ("wikilink", Ref("01-runbook.md", 0), Ref("00-overview.md", 1)),
        ("mdlink", Ref("01-runbook.md", 1), Ref("sub/guide.md")),
        ("wikilink", Ref("01-runbook.md", 1), Ref("other/notes.md")),
    }
    first = next(e for e in edges if e.target == Ref("00-overview.md"))
    assert first.evidence == {
        "quote": "See [[00-overview]] for context.",
        "source": "01-runbook.md",
        "offset": RUNBOOK.index("[[00-overview]]"),
    }
    # A title is no name: `[[Overview]]` names no file.
    assert unresolved == [
        Unresolved("01-runbook.md", 3, "Overview", NO_FILE),
        Unresolved("01-runbook.md", 6, "../outside.md", "leaves the folder"),
        Unresolved("01-runbook.md", 7, "diagram.png", NO_FILE),
        Unresolved("01-runbook.md", 11, "missing-note", NO_FILE),
    ]


def test_paths_resolve_from_the_folder_then_by_the_nearest_file_name() -> None:
    resolver = Resolver(infos())
    assert resolver.wikilink("sub/guide.md", "notes") == "sub/notes.md"
    assert resolver.wikilink("other/x.md", "NOTES") == "other/notes.md"
    assert resolver.wikilink("x.md", "sub/notes") == "sub/notes.md"
    assert resolver.wikilink("x.md", "Sub/Notes.md") == "sub/notes.md"
    assert isinstance(resolver.wikilink("x.md", "Notes A"), Unresolved)
    assert resolver.mdlink("sub/guide.md", "../01-runbook.md") == "01-runbook.md"
    assert resolver.mdlink("sub/guide.md", "./../sub/../00-overview.md") == "00-overview.md"
    refused = resolver.mdlink("sub/guide.md", "../../etc/passwd")
    assert isinstance(refused, Unresolved) and refused.reason == "leaves the folder"
    # A link resolves once its target exists.
    missing = resolver.wikilink("01-runbook.md", "missing-note")
    assert isinstance(missing, Unresolved)
    later = Resolver([*infos(), FileInfo("missing-note.md", "Missing")])
    assert later.wikilink("01-runbook.md", "missing-note") == "missing-note.md"


def test_markdown_links_are_read_in_markdown_only() -> None:
    text = "see [a](b.md) and [[b]]"
    assert [f.detector for f in links("x.txt", text, split("x.txt", text))] == [WIKILINK]
    assert [f.detector for f in links("x.md", text, split("x.md", text))] == [MDLINK, WIKILINK]


def test_a_long_line_is_quoted_around_its_link() -> None:
    line = "  " + "a" * 300 + " [[target]] " + "b" * 300
    shown = quote(line, line.index("[[target]]"))
    assert len(shown) == MAX_QUOTE_CHARS and "[[target]]" in shown and shown in line
    assert quote("  short [[x]]  ", 8) == "short [[x]]"


def test_structure_is_parts_in_order_numbered_files_and_a_chain_per_directory() -> None:
    edges = structure_edges(
        {"00-overview.md": 2, "01-runbook.md": 1, "10-last.md": 1, "notes.md": 1, "sub/a.md": 1}
    )

    def of(detector: object) -> list[tuple[Ref, Ref]]:
        return [(e.source, e.target) for e in edges if e.detector is detector]

    assert of(SEQUENCE) == [
        (Ref("00-overview.md", 0), Ref("00-overview.md", 1)),
        (Ref("00-overview.md"), Ref("01-runbook.md")),
        (Ref("01-runbook.md"), Ref("10-last.md")),
    ]
    # A chain, not a clique; a directory of one file has none.
    assert of(SAME_DIR) == [
        (Ref("00-overview.md"), Ref("01-runbook.md")),
        (Ref("01-runbook.md"), Ref("10-last.md")),
        (Ref("10-last.md"), Ref("notes.md")),
    ]
    same = next(e for e in edges if e.detector is SAME_DIR)
    assert same.evidence == {
        "rationale": "00-overview.md and 01-runbook.md share directory .",
        "source": "00-overview.md",
    }
    assert all("quote" not in e.evidence for e in edges)


def test_detectors_are_versioned_constants() -> None:
    assert [d.id for d in (WIKILINK, MDLINK, SEQUENCE, SAME_DIR)] == [
        "wikilink@1",
        "mdlink@1",
        "sequence@1",
        "same_dir@1",
    ]
    assert (WIKILINK.confidence, SEQUENCE.confidence, SAME_DIR.confidence) == (0.95, 0.99, 0.4)
    assert isinstance(Edge(SAME_DIR, Ref("a"), Ref("b"), {}).key, tuple)


def test_a_table_s_escaped_pipe_ends_the_target_and_the_heading() -> None:
    text = "| [[Table view\\|Table]] | [[Table view#Layout\\|the layout]] | [[a|b]] |\n"
    found = links("x.md", text, split("x.md", text))
    assert [(f.target, f.heading, f.alias) for f in found] == [
        ("Table view", None, "Table"),
        ("Table view", "Layout", "the layout"),
        ("a", None, "b"),
    ]
    assert text[found[1].offset :].startswith("[[Table view#Layout\\|")


def test_code_fenced_inside_a_callout_is_code_until_its_fence_or_the_quote_ends() -> None:
    text = (
        "> [!note]\n> ```\n> [[in code]]\n> ```\n> [[after]]\n"
        "> ~~~\n> [[open fence]]\n\n[[quote ended]]\n"
        "```\n> [[quoted in code]]\n```\n[[last]]\n"
    )
    found = links("x.md", text, split("x.md", text))
    assert [f.target for f in found] == ["after", "quote ended", "last"]


def test_names_and_headings_match_in_any_case_and_titles_never() -> None:
    files = [
        FileInfo("Formulas.md", "Formulas", ("Formulas", "functions")),
        FileInfo("Bases/Syntax.md", "Bases syntax", ("Bases syntax", "Example")),
        FileInfo("map.png", "map"),
    ]
    resolver = Resolver(files)
    assert resolver.wikilink("Bases/Syntax.md", "formulas") == "Formulas.md"
    assert resolver.part("Formulas.md", "Functions") == 1
    assert resolver.part("Formulas.md", "Formulas#FUNCTIONS") == 1
    assert resolver.part("Formulas.md", "^block") is None
    assert resolver.wikilink("a.md", "MAP.PNG") == "map.png"
    # An attachment is named with its suffix; a heading or a title is no name.
    for target in ("map", "Example", "Bases syntax"):
        assert isinstance(resolver.wikilink("a.md", target), Unresolved), target


def test_every_link_is_an_edge_unresolved_or_skipped_with_why() -> None:
    text = "# A\n## B\n[[#b]] [[A#B]] [[#a]] [[#A]] [[C]] [[missing]]\n"
    resolver = Resolver(
        [FileInfo("A.md", "A", tuple(p.title for p in split("A.md", text))), FileInfo("C.md", "C")]
    )
    linked = link_edges("A.md", links("A.md", text, split("A.md", text)), resolver)
    assert {(e.source, e.target) for e in linked.edges} == {
        (Ref("A.md", 1), Ref("A.md", 0)),
        (Ref("A.md", 1), Ref("C.md")),
    }
    assert [u.target for u in linked.unresolved] == ["missing"]
    assert linked.skipped == {SELF: 2, REPEATED: 1}
