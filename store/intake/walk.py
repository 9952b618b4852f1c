"""Walking a folder: the files intake reads, by path relative to the folder.

Paths never leave the folder: a symbolic link is followed only when what it points to
resolves inside the folder, and a linked directory is never entered (no loops, no
file seen twice by way of another). Hidden entries (a name starting with `.`, such as
`.git`) are left out. A file is read only when asked (`read`), so a re-run can skip
files whose size and modified time match what it recorded.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Found:
    """A file of the folder, before it is read."""

    path: str  # relative to the folder, with `/`
    size: int
    modified_at: datetime | None  # None: the sender gave no time


@dataclass(frozen=True)
class Skipped:
    """Something intake does not read, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class Text:
    """A file's text: `content` decoded, `sha256` over its bytes, and `note` when its
    bytes were not all valid UTF-8 (each bad byte became U+FFFD)."""

    content: str
    sha256: str
    note: str | None = None


@dataclass(frozen=True)
class Walked:
    files: tuple[Found, ...]
    skipped: tuple[Skipped, ...]


def walk(root: Path) -> Walked:
    """Every file under `root`, sorted by relative path, and what was left out."""
    base = root.resolve(strict=True)
    if not base.is_dir():
        raise NotADirectoryError(f"{root} is not a folder")
    files: list[Found] = []
    skipped: list[Skipped] = []
    for here, dirs, names in os.walk(base, followlinks=False):
        where = Path(here)
        kept = []
        for name in sorted(dirs):
            full = where / name
            rel = _rel(base, full)
            if name.startswith("."):
                continue
            if full.is_symlink():
                skipped.append(Skipped(rel, "a link to a folder (not followed)"))
                continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(names):
            if name.startswith("."):
                continue
            full = where / name
            rel = _rel(base, full)
            found = _found(base, full, rel)
            if isinstance(found, Skipped):
                skipped.append(found)
            else:
                files.append(found)
    files.sort(key=lambda f: f.path)
    skipped.sort(key=lambda s: s.path)
    return Walked(tuple(files), tuple(skipped))


def _rel(base: Path, full: Path) -> str:
    return PurePosixPath(full.relative_to(base).as_posix()).as_posix()


def _found(base: Path, full: Path, rel: str) -> Found | Skipped:
    if full.is_symlink():
        try:
            target = full.resolve(strict=True)
        except (OSError, RuntimeError):
            return Skipped(rel, "a broken link")
        if not target.is_relative_to(base):
            return Skipped(rel, "a link pointing outside the folder (not followed)")
    try:
        stat = full.stat()
    except OSError as exc:
        return Skipped(rel, f"unreadable: {exc.strerror or exc}")
    if not full.is_file():
        return Skipped(rel, "not a regular file")
    # To the microsecond, as the database keeps times.
    modified = _EPOCH + timedelta(microseconds=stat.st_mtime_ns // 1000)
    return Found(rel, stat.st_size, modified)


def read(root: Path, found: Found) -> Text | Skipped:
    """The file's text, or why it is skipped (binary, unreadable)."""
    try:
        data = (root / found.path).read_bytes()
    except OSError as exc:
        return Skipped(found.path, f"unreadable: {exc.strerror or exc}")
    return decode(found.path, data)


def decode(path: str, data: bytes) -> Text | Skipped:
    """Bytes as text: binary files are skipped; invalid UTF-8 is replaced and noted."""
    # A NUL marks a binary file (as git and grep decide), and no text may hold one.
    if b"\x00" in data:
        return Skipped(path, "binary")
    digest = hashlib.sha256(data).hexdigest()
    try:
        return Text(data.decode("utf-8"), digest)
    except UnicodeDecodeError as exc:
        content = data.decode("utf-8", errors="replace")
        note = f"not valid UTF-8 (first bad byte at {exc.start}); bad bytes read as U+FFFD"
        return Text(content, digest, note)


def text_hash(content: str) -> str:
    """The hash a file sent as text (the mutation) is kept under: of its UTF-8 bytes, as
    a file read from disk with the same text."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()
