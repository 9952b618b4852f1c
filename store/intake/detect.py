"""Detectors: the links a folder's files state, and the links its structure implies.

Deterministic and versioned (`name@N`), each with a constant confidence and weight:
`wikilink` and `mdlink` quote the line that states the link (`quote`, `source`, and
`offset`, the character position of the link in the file, so `content[offset:]` starts
with the link's text); `sequence` and `same_dir` state their rationale instead.

Resolution is strict: by path relative to the folder (then, for a wikilink, relative to
the linking file's folder), then by unique file name, then by unique title. A target
that is missing or names several files is unresolved and reported with its file and
line; no edge is invented. A Markdown link is resolved by path only, inside the folder:
one whose `../` leaves the folder is refused.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from store.intake.parts import Part, is_markdown

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

_WIKILINK = re.compile(r"!?\[\[([^\[\]|#\n]*)(?:#([^\[\]|\n]*))?(?:\|([^\[\]\n]*))?\]\]")
_MDLINK = re.compile(r"(?<!!)\[([^\[\]\n]*)\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
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


@dataclass(frozen=True)
class Unresolved:
    path: str
    line: int
    target: str
    reason: str


@dataclass(frozen=True)
class FileInfo:
    """What resolution knows of a file: its path, title and parts' headings."""

    path: str
    title: str
    headings: tuple[str | None, ...] = ()


def links(path: str, content: str, parts: Sequence[Part]) -> list[Link]:
    """Every wikilink and relative Markdown link of a file, outside code, in order."""
    found: list[Link] = []
    starts = [p.start for p in parts]
    fenced = False
    offset = 0
    for number, line in enumerate(content.splitlines(keepends=True), start=1):
        bare = line.rstrip("\r\n")
        at, offset = offset, offset + len(line)
        if _FENCE.match(bare):
            fenced = not fenced
            continue
        if fenced or "[" not in bare:
            continue
        masked = _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), bare)
        for match in _WIKILINK.finditer(masked):
            start = match.start() + (1 if match.group(0).startswith("!") else 0)
            target, heading = match.group(1).strip(), match.group(2)
            found.append(
                Link(
                    WIKILINK,
                    target,
                    heading.strip() if heading else None,
                    at + start,
                    number,
                    quote(bare, start),
                    _part_at(starts, at + start),
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
                )
            )
    found.sort(key=lambda link: link.offset)
    return found


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


class Resolver:
    """Resolves link targets among a folder's files, strictly."""

    def __init__(self, files: Iterable[FileInfo]) -> None:
        self.files = {f.path: f for f in files}
        self.by_name: dict[str, set[str]] = defaultdict(set)
        self.by_title: dict[str, set[str]] = defaultdict(set)
        for f in self.files.values():
            name = posixpath.basename(f.path)
            self.by_name[name].add(f.path)
            self.by_name[posixpath.splitext(name)[0]].add(f.path)
            self.by_title[f.title].add(f.path)
        self._seen: dict[tuple[str, str, str], str | Unresolved] = {}

    def wikilink(self, source: str, target: str) -> str | Unresolved:
        """The path a wikilink's target names, or why it names none."""
        if not target:
            return source
        return self._cached("w", source, target)

    def mdlink(self, source: str, target: str) -> str | Unresolved:
        """The path a relative Markdown link names, inside the folder, or why none."""
        return self._cached("m", source, target)

    def _cached(self, kind: str, source: str, target: str) -> str | Unresolved:
        # Files of one folder link to the same targets: each is resolved once per folder.
        here = posixpath.dirname(source)
        key = (kind, here, target)
        found = self._seen.get(key)
        if found is None:
            resolve = self._wikilink if kind == "w" else self._mdlink
            found = self._seen[key] = resolve(here, target)
        if isinstance(found, Unresolved):
            return Unresolved(source, 0, target, found.reason)
        return found

    def _wikilink(self, here: str, target: str) -> str | Unresolved:
        simple = "/" not in target and not target.startswith(".")
        for base in ("", here):
            for candidate in (target, target + ".md"):
                if simple:
                    path: str | None = f"{base}/{candidate}" if base else candidate
                else:
                    path = _inside(posixpath.join(base, candidate))
                if path in self.files:
                    return path
        for index, what in ((self.by_name, "file name"), (self.by_title, "title")):
            found = index.get(target, set())
            if len(found) == 1:
                return next(iter(found))
            if found:
                listed = ", ".join(sorted(found)[:5])
                return Unresolved("", 0, target, f"ambiguous: the {what} of {listed}")
        return Unresolved("", 0, target, "no file has this path, file name or title")

    def _mdlink(self, here: str, target: str) -> str | Unresolved:
        path = _inside(posixpath.join(here, target))
        if path is None:
            return Unresolved("", 0, target, "leaves the folder")
        if path in self.files:
            return path
        return Unresolved("", 0, target, "no file has this path")

    def part(self, path: str, heading: str | None) -> int | None:
        """The part of `path` that a `#heading` names, when exactly one does."""
        if heading is None:
            return None
        found = [n for n, h in enumerate(self.files[path].headings) if h == heading]
        return found[0] if len(found) == 1 else None


def _inside(path: str) -> str | None:
    """A joined path normalised, or None when it leaves the folder."""
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../") or normal.startswith("/"):
        return None
    return normal


def link_edges(
    source: str, found: Sequence[Link], resolver: Resolver
) -> tuple[list[Edge], list[Unresolved]]:
    """The edges a file's links state, and the links that name no file."""
    edges: dict[tuple[str, Ref, Ref], Edge] = {}
    unresolved = []
    for link in found:
        if link.detector is WIKILINK:
            to = resolver.wikilink(source, link.target)
        else:
            to = resolver.mdlink(source, link.target)
        if isinstance(to, Unresolved):
            shown = link.target + (f"#{link.heading}" if link.heading else "")
            unresolved.append(Unresolved(source, link.line, shown, to.reason))
            continue
        target = Ref(to, resolver.part(to, link.heading))
        edge = Edge(
            link.detector,
            Ref(source, link.part),
            target,
            {"quote": link.quote, "source": source, "offset": link.offset},
        )
        # The first statement of a link is its evidence.
        edges.setdefault(edge.key, edge)
    return list(edges.values()), unresolved


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
