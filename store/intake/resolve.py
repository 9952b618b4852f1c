"""Resolving a link's target among a folder's files, by Obsidian's rules.

A wikilink names a file by its path or its file name, case-insensitively, never by a
title, a heading or an alias. A Markdown note may be named without its suffix
(`[[Formulas]]` is `Formulas.md`); any other file (an attachment, a text file) with it
(`[[map.png]]`). A target starting with `./` or `../` is a path from the linking file's
folder; one holding a `/` is a path from the folder's root, or else the end of a path
(`[[Bases/Views]]` names `docs/Bases/Views.md`); a bare name names every file so called.
When several files answer, the link goes to the one nearest the linking file: the one
sharing the most folders with it, then the shallowest, then the first by path. A
Markdown link (`[text](path)`) is a path from the linking file's folder first, then the
same as a wikilink. A `#heading` names the first section whose heading is the same text
ignoring case and runs of blanks (of `#A#B`, the last, `B`); a `#^block` names the file.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from store.intake.parts import is_markdown


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


NO_FILE = "no file has this path or file name"
LEAVES = "leaves the folder"


def names(path: str) -> tuple[str, ...]:
    """The paths a link may give for a file: its own and, for a note, without suffix."""
    if is_markdown(path):
        return (path, posixpath.splitext(path)[0])
    return (path,)


class Resolver:
    """Resolves link targets among a folder's files."""

    def __init__(self, files: Iterable[FileInfo]) -> None:
        self.files = {f.path: f for f in files}
        self.by_path: dict[str, list[str]] = defaultdict(list)
        self.by_name: dict[str, list[str]] = defaultdict(list)
        for path in sorted(self.files):
            for name in names(path):
                self.by_path[name.lower()].append(path)
                self.by_name[posixpath.basename(name).lower()].append(path)
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
            found = self._seen[key] = self._resolve(kind, here, target)
        if isinstance(found, Unresolved):
            return Unresolved(source, 0, target, found.reason)
        return found

    def _resolve(self, kind: str, here: str, target: str) -> str | Unresolved:
        relative = target.startswith(("./", "../"))
        if kind == "m" or relative:
            path = _inside(posixpath.join(here, target))
            if path is None:
                return Unresolved("", 0, target, LEAVES)
            found = self._exact(path)
            if found is not None or relative:
                return found or Unresolved("", 0, target, NO_FILE)
        # A leading `/` is the folder's root, as in the editors.
        wanted = target.lstrip("/")
        if "/" in wanted:
            found = self._exact(wanted)
            if found is not None:
                return found
        key = wanted.lower()
        candidates = [
            p
            for p in self.by_name.get(posixpath.basename(key), ())
            if any(n.lower() == key or n.lower().endswith("/" + key) for n in names(p))
        ]
        if not candidates:
            return Unresolved("", 0, target, NO_FILE)
        return min(candidates, key=lambda p: _distance(here, p))

    def _exact(self, path: str) -> str | None:
        """The file at `path` (its case, else any), or None."""
        found = self.by_path.get(path.lower())
        if not found:
            return None
        return next((p for p in found if path in names(p)), found[0])

    def part(self, path: str, heading: str | None) -> int | None:
        """The part of `path` that a `#heading` names, if one does."""
        if heading is None:
            return None
        pieces = [p for p in heading.split("#") if p.strip()]
        if not pieces or pieces[-1].lstrip().startswith("^"):
            return None
        wanted = _fold(pieces[-1])
        for n, h in enumerate(self.files[path].headings):
            if h is not None and _fold(h) == wanted:
                return n
        return None


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def _distance(here: str, path: str) -> tuple[int, int, str]:
    """Orders candidates nearest the folder `here` first."""
    mine = here.split("/") if here else []
    theirs = posixpath.dirname(path).split("/") if "/" in path else []
    shared = 0
    for a, b in zip(mine, theirs, strict=False):
        if a != b:
            break
        shared += 1
    return (-shared, len(theirs), path)


def _inside(path: str) -> str | None:
    """A joined path normalised, or None when it leaves the folder."""
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../") or normal.startswith("/"):
        return None
    return normal
