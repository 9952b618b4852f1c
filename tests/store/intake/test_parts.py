"""Splitting files into parts: by heading, by size, offsets kept, never truncated."""

from __future__ import annotations

from store.intake.parts import Part, headings, split, title_of

NOTE = """Intro line.

# Overview
Some text.

## Details
```sh
# not a heading
```
More.
"""


def test_markdown_splits_before_each_heading_outside_code() -> None:
    parts = split("a.md", NOTE)
    assert [p.title for p in parts] == [None, "Overview", "Details"]
    assert "".join(p.text for p in parts) == NOTE
    for p in parts:
        assert NOTE[p.start : p.end] == p.text
    assert parts[1].text.startswith("# Overview")
    assert [p.index for p in parts] == [0, 1, 2]


def test_blank_lines_before_the_first_heading_join_it() -> None:
    parts = split("a.md", "\n\n# One\nx\n# Two\ny")
    assert [(p.start, p.title) for p in parts] == [(0, "One"), (10, "Two")]


def test_headings_and_titles() -> None:
    assert headings("# A\ntext\n  ## B ##\n####### no\n#no") == [(0, 1, "A"), (9, 2, "B")]
    assert title_of("x/01-runbook.md", "intro\n## Sub\n# Runbook\n") == "Runbook"
    assert title_of("x/01-runbook.md", "intro\n## Sub\n") == "Sub"
    assert title_of("x/notes.txt", "# Not markdown\n") == "notes"


def test_plain_text_splits_by_size_at_a_break() -> None:
    text = ("word " * 30 + "\n\n") * 40
    parts = split("a.txt", text, plain_chars=400)
    assert len(parts) > 1
    assert "".join(p.text for p in parts) == text
    assert all(len(p.text) <= 400 for p in parts)
    assert all(p.text.endswith("\n\n") for p in parts[:-1])
    assert all(p.title is None for p in parts)


def test_text_without_breaks_is_cut_at_the_size() -> None:
    parts = split("a.txt", "x" * 1001, plain_chars=500)
    assert [(p.start, len(p.text)) for p in parts] == [(0, 500), (500, 500), (1000, 1)]


def test_a_section_over_the_content_limit_is_split_not_truncated() -> None:
    big = "# Big\n" + ("line\n" * 100)
    parts = split("a.md", big, limit=120)
    assert len(parts) > 1 and all(len(p.text) <= 120 for p in parts)
    assert "".join(p.text for p in parts) == big
    assert parts[0].title == "Big" and all(p.title is None for p in parts[1:])


def test_an_empty_file_has_no_parts() -> None:
    assert split("a.md", "") == ()
    assert split("a.md", "x") == (Part(0, 0, "x", None),)
