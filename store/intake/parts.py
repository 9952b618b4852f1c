"""Splitting a file's text into parts, each keeping its character offset in the file.

Markdown is split before each heading (outside fenced code); other text by size, at a
paragraph or line break where one is near. A part larger than a record may hold is
split again by size, so a file is never truncated: the parts, in order, are exactly
the file's text (`"".join(p.text for p in parts) == content`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from store.limits import MAX_CONTENT_CHARS

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
# The size of a plain-text part: a few screens, as a reader would take them in.
PLAIN_PART_CHARS = 4000
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


@dataclass(frozen=True)
class Part:
    index: int
    start: int  # character offset of the part in the file
    text: str
    title: str | None = None  # the heading it starts with (Markdown)

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def is_markdown(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in MARKDOWN_SUFFIXES


def headings(content: str) -> list[tuple[int, int, str]]:
    """(offset, level, text) of every Markdown heading line outside fenced code."""
    found = []
    fenced = False
    offset = 0
    for line in content.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if _FENCE.match(bare):
            fenced = not fenced
        elif not fenced:
            match = _HEADING.match(bare)
            if match:
                found.append((offset, len(match.group(1)), match.group(2).strip()))
        offset += len(line)
    return found


def title_of(path: str, content: str) -> str:
    """A file's title: its first level-1 heading, else its first heading, else its name
    without the suffix."""
    if is_markdown(path):
        found = headings(content)
        for _, level, text in found:
            if level == 1:
                return text
        if found:
            return found[0][2]
    return PurePosixPath(path).stem


def split(
    path: str,
    content: str,
    plain_chars: int = PLAIN_PART_CHARS,
    limit: int = MAX_CONTENT_CHARS,
) -> tuple[Part, ...]:
    """The parts of a file's text (none for an empty file)."""
    if not content:
        return ()
    if is_markdown(path):
        sections = _sections(content)
    else:
        sections = [(s, e, None) for s, e in _by_size(content, 0, len(content), plain_chars)]
    parts: list[Part] = []
    for start, end, title in sections:
        pieces = [(start, end)] if end - start <= limit else _by_size(content, start, end, limit)
        for n, (a, b) in enumerate(pieces):
            parts.append(Part(len(parts), a, content[a:b], title if n == 0 else None))
    return tuple(parts)


def _sections(content: str) -> list[tuple[int, int, str | None]]:
    """Markdown sections: what comes before the first heading (unless only blank), then
    one section per heading."""
    marks = headings(content)
    starts: list[tuple[int, str | None]] = [(offset, text) for offset, _, text in marks]
    if not starts or (starts[0][0] > 0 and content[: starts[0][0]].strip()):
        starts.insert(0, (0, None))
    else:
        # Blank lines before the first heading belong to it.
        starts[0] = (0, starts[0][1])
    ends = [s for s, _ in starts[1:]] + [len(content)]
    return [(s, e, t) for (s, t), e in zip(starts, ends, strict=True)]


def _by_size(content: str, start: int, end: int, size: int) -> list[tuple[int, int]]:
    """[start, end) in pieces of at most `size` characters, each ending after a blank
    line or a line break in the second half of its window where there is one."""
    pieces = []
    at = start
    while end - at > size:
        window = content[at : at + size]
        cut = window.rfind("\n\n")
        if cut < size // 2:
            cut = window.rfind("\n")
            cut = cut + 1 if cut >= size // 2 else size
        else:
            cut += 2
        pieces.append((at, at + cut))
        at += cut
    pieces.append((at, end))
    return pieces
