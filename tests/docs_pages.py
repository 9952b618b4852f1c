"""The documentation's pages (the README, `docs/*.md` and `bench/README.md`) and the fenced
blocks they show, read the way the docs tests read them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.support import REPO

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# A block shown for its shape only (a placeholder such as `files: [...]` stands in for what
# the reader fills in): `graphql illustrative`. The docs tests count such blocks, and only them,
# as not checked.
ILLUSTRATIVE = "illustrative"


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository, e.g. "docs/api.md"
    number: int  # its place among the page's blocks of its language, from 0
    language: str
    marks: tuple[str, ...]  # the info string's words after the language
    text: str
    offset: int  # where the block starts in the page's text

    @property
    def name(self) -> str:
        return f"{self.page}#{self.language}{self.number}"


def pages() -> list[Path]:
    """The README, the docs pages and the benches' page (not their journal: past runs)."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "bench" / "README.md"]


def page_text(name: str) -> str:
    return (REPO / name).read_text(encoding="utf-8")


def section(page: str, heading: str) -> str:
    """The text of a page from `heading` (a whole heading line) to the next heading of the
    same or a higher level."""
    text = page_text(page)
    start = text.index(f"\n{heading}\n")
    level = heading.split(" ", 1)[0]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", text[start + 1 :], re.M)]
    later = [end for end in ends if end > 0]
    return text[start : start + 1 + later[0]] if later else text[start:]


def blocks(language: str) -> list[Block]:
    """Every fenced block of `language` on every page, in page order."""
    found = []
    for path in pages():
        name = path.relative_to(REPO).as_posix()
        text = path.read_text(encoding="utf-8")
        number = 0
        for match in FENCE.finditer(text):
            words = match[1].split()
            if words[:1] != [language]:
                continue
            found.append(Block(name, number, language, tuple(words[1:]), match[2], match.start()))
            number += 1
    return found
