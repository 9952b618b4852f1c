"""Frontmatter as the editors read it: a title, aliases, and other keys as properties;
tags stay text; what is not kept is said."""

from __future__ import annotations

from store.intake.frontmatter import Frontmatter, frontmatter
from store.intake.records import LABELS

OWN = frozenset(LABELS)
NOTE = """---
title: The real title
aliases: [Formulae, Calc]
tags: [math, notes]
status: draft
due: 2026-12-24
done: false
rank: 3
Related notes: "[[Other]]"
path: elsewhere.md
e_group: x
nested: {a: 1}
empty:
---
# Heading
"""


def test_frontmatter_gives_a_title_aliases_and_properties() -> None:
    front = frontmatter("a.md", NOTE, OWN)
    assert front.title == "The real title"
    assert front.properties == (
        "alias:Formulae",
        "alias:Calc",
        "status:draft",
        "due:2026-12-24",
        "done:false",
        "rank:3",
        "Related_notes:[[Other]]",
    )
    assert front.labels == ("Related_notes", "alias", "done", "due", "rank", "status")
    assert [n.split(":")[0] for n in front.notes] == [
        "frontmatter key 'path' not kept as a property",
        "frontmatter key 'e_group' not kept as a property",
        "frontmatter key 'nested' not kept as a property",
    ]


def test_only_a_markdown_note_s_opening_block_is_frontmatter() -> None:
    assert frontmatter("a.txt", NOTE, OWN) == Frontmatter()
    assert frontmatter("a.md", "# A\n---\nstatus: x\n---\n", OWN) == Frontmatter()
    assert frontmatter("a.md", "---\nalias: One\n---\n", OWN).properties == ("alias:One",)
    bad = frontmatter("a.md", "---\nkey: [unclosed\n---\n", OWN)
    assert bad.properties == () and bad.notes == (
        "its frontmatter is not valid YAML: kept as text only",
    )
