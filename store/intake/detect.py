"""Detectors: the links a folder's files state, and the links its structure implies.

Deterministic and versioned (`name@N`), each with a constant confidence and weight:
`wikilink` and `mdlink` quote the line that states the link (`quote`, `source`, and
`offset`, the character position of the link in the file, so `content[offset:]` starts
with the link's text); `sequence` and `same_dir` state their rationale instead.

Links are read as Obsidian reads them: outside code (fenced, also inside a callout or
block quote, or inline), `[[target#heading|alias]]` with the pipe escaped (`\\|`) inside a
table, `![[embed]]` like a link. Targets resolve by path and file name
(`store.intake.resolve`); one that names no file is unresolved and reported with its file
and line, and no edge is invented. Every link is accounted for: an edge, unresolved, or
skipped with its reason (a second link from a section to the same target; a link to the
section that holds it).
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from store.intake.parts import Part, is_markdown
from store.intake.resolve import Resolver, Unresolved

MAX_QUOTE_CHARS = 240
# How much of a long line a quote keeps before the link.
_QUOTE_LEAD = 80


@dataclass(frozen=True)
class Detector:
    name: str
    version: int
    confidence: float
    weight: float

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"


WIKILINK = Detector("wikilink", 1, 0.95, 1.0)
MDLINK = Detector("mdlink", 1, 0.95, 1.0)
SEQUENCE = Detector("sequence", 1, 0.99, 1.0)
SAME_DIR = Detector("same_dir", 1, 0.4, 0.5)
DETECTORS = (WIKILINK, MDLINK, SEQUENCE, SAME_DIR)

# Lazy, so that a pipe escaped inside a table (`\|`) ends the target or heading.
_WIKILINK = re.compile(r"!?\[\[([^\[\]|#\n]*?)(?:#([^\[\]|\n]*?))?(?:\\?\|([^\[\]\n]*))?\]\]")
_MDLINK = re.compile(r"(?<!!)\[([^\[\]\n]*)\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_QUOTE = re.compile(r" {0,3}> ?")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_NUMBERED = re.compile(r"^(\d+)[-_. ]")


@dataclass(frozen=True, order=True)
class Ref:
    """One end of a detected edge: a file's record (part None) or one of its parts."""

    path: str
    part: int | None = None


@dataclass(frozen=True)
class Edge:
    """A detected edge, its evidence (a quote) or its rationale."""

    detector: Detector
    source: Ref
    target: Ref
    evidence: Mapping[str, Any]

    @property
    def key(self) -> tuple[str, Ref, Ref]:
        return (self.detector.name, self.source, self.target)


@dataclass(frozen=True)
class Link:
    """A link as written in a file."""

    detector: Detector
    target: str  # as written: a name, title or path
    heading: str | None
    offset: int  # of the link's text in the file
    line: int  # 1-based
    quote: str
    part: int  # the part holding it
    alias: str | None = None  # what the link shows instead of its target


# Why a link found is no edge of its own (the others are edges or unresolved).
REPEATED = "a second link from its section to the same target"
SELF = "a link to the section that holds it"


def links(path: str, content: str, parts: Sequence[Part]) -> list[Link]:
    """Every wikilink and relative Markdown link of a file, outside code, in order."""
    found: list[Link] = []
    starts = [p.start for p in parts]
    lines = content.splitlines(keepends=True)
    offset = 0
    for number, (line, code) in enumerate(zip(lines, _code(lines), strict=True), start=1):
        bare = line.rstrip("\r\n")
        at, offset = offset, offset + len(line)
        if code or "[" not in bare:
            continue
        masked = _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), bare)
        for match in _WIKILINK.finditer(masked):
            start = match.start() + (1 if match.group(0).startswith("!") else 0)
            target, heading, alias = match.group(1).strip(), match.group(2), match.group(3)
            found.append(
                Link(
                    WIKILINK,
                    target,
                    heading.strip() if heading else None,
                    at + start,
                    number,
                    quote(bare, start),
                    _part_at(starts, at + start),
                    alias,
                )
            )
        if not is_markdown(path):
            continue
        for match in _MDLINK.finditer(masked):
            target = match.group(2)
            if _SCHEME.match(target) or target.startswith(("#", "/")):
                continue
            bare_target, _, fragment = target.partition("#")
            bare_target = unquote(bare_target.partition("?")[0])
            found.append(
                Link(
                    MDLINK,
                    bare_target,
                    unquote(fragment) or None,
                    at + match.start(),
                    number,
                    quote(bare, match.start()),
                    _part_at(starts, at + match.start()),
                    match.group(1),
                )
            )
    found.sort(key=lambda link: link.offset)
    return found


def _code(lines: Sequence[str]) -> list[bool]:
    """Whether each line is fenced code (its fences included). A fence opened inside a
    block quote or callout (`> ```) is closed by its fence at the same depth, or ends
    with the quote that holds it."""
    flags = []
    depth: int | None = None  # of the open fence's quote
    for line in lines:
        bare = line.rstrip("\r\n")
        if depth is not None:
            held, rest = _unquoted(bare, depth)
            if held == depth:
                if _FENCE.match(rest):
                    depth = None
                flags.append(True)
                continue
            depth = None
        held, rest = _unquoted(bare, None)
        if _FENCE.match(rest):
            depth = held
        flags.append(depth is not None)
    return flags


def _unquoted(line: str, most: int | None) -> tuple[int, str]:
    """How many block-quote markers (at most `most`) open the line, and what follows."""
    held = 0
    while most is None or held < most:
        match = _QUOTE.match(line)
        if match is None:
            break
        held, line = held + 1, line[match.end() :]
    return held, line


def quote(line: str, at: int) -> str:
    """The line trimmed, at most MAX_QUOTE_CHARS long; a long line keeps the stretch that
    holds the link at `at`. Always a piece of the file as written."""
    lead = len(line) - len(line.lstrip())
    text = line.strip()
    if len(text) <= MAX_QUOTE_CHARS:
        return text
    begin = max(0, min(at - lead - _QUOTE_LEAD, len(text) - MAX_QUOTE_CHARS))
    return text[begin : begin + MAX_QUOTE_CHARS].strip()


def _part_at(starts: Sequence[int], offset: int) -> int:
    index = 0
    for n, start in enumerate(starts):
        if start <= offset:
            index = n
    return index


@dataclass
class Linked:
    """What a file's links state: edges, links that name no file, and links skipped, by
    why."""

    edges: list[Edge] = field(default_factory=list)
    unresolved: list[Unresolved] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


def link_edges(source: str, found: Sequence[Link], resolver: Resolver) -> Linked:
    """The edges a file's links state, the links that name no file, and those skipped."""
    edges: dict[tuple[str, Ref, Ref], Edge] = {}
    linked = Linked()
    for link in found:
        if link.detector is WIKILINK:
            to = resolver.wikilink(source, link.target)
        else:
            to = resolver.mdlink(source, link.target)
        if isinstance(to, Unresolved):
            shown = link.target + (f"#{link.heading}" if link.heading else "")
            linked.unresolved.append(Unresolved(source, link.line, shown, to.reason))
            continue
        start, target = Ref(source, link.part), Ref(to, resolver.part(to, link.heading))
        if start == target:
            linked.skipped[SELF] += 1
            continue
        edge = Edge(
            link.detector,
            start,
            target,
            {"quote": link.quote, "source": source, "offset": link.offset},
        )
        # The first statement of a link is its evidence.
        if edge.key in edges:
            linked.skipped[REPEATED] += 1
            continue
        edges[edge.key] = edge
    linked.edges = list(edges.values())
    return linked


def structure_edges(files: Mapping[str, int]) -> list[Edge]:
    """The edges a folder's layout implies, from each file's path and number of parts:
    a file's parts in order, numbered files in order, and each directory's files as a
    chain in sorted order (never a clique)."""
    edges = []
    by_dir: dict[str, list[str]] = defaultdict(list)
    for path in sorted(files):
        by_dir[posixpath.dirname(path)].append(path)
        for n in range(files[path] - 1):
            why = f"part {n + 1} of {path} follows part {n}"
            edges.append(Edge(SEQUENCE, Ref(path, n), Ref(path, n + 1), _why(why, path)))
    for directory, paths in sorted(by_dir.items()):
        shown = directory or "."
        numbered = sorted(
            (int(m.group(1)), p)
            for p in paths
            if (m := _NUMBERED.match(posixpath.basename(p))) is not None
        )
        for (_, a), (_, b) in zip(numbered, numbered[1:], strict=False):
            why = f"{posixpath.basename(a)} comes before {posixpath.basename(b)} in {shown}"
            edges.append(Edge(SEQUENCE, Ref(a), Ref(b), _why(why, a)))
        for a, b in zip(paths, paths[1:], strict=False):
            why = f"{posixpath.basename(a)} and {posixpath.basename(b)} share directory {shown}"
            edges.append(Edge(SAME_DIR, Ref(a), Ref(b), _why(why, a)))
    return edges


def _why(rationale: str, source: str) -> dict[str, Any]:
    return {"rationale": rationale, "source": source}
