"""Walking a folder: the files intake reads, by path relative to the folder.

Paths never leave the folder: a symbolic link is followed only when what it points to
resolves inside the folder, and a linked directory is never entered (no loops, no
file seen twice by way of another). Hidden entries (a name starting with `.`, such as
`.git`) are left out. A file is read only when asked (`read`), so a re-run can skip
files whose size and modified time match what it recorded. An attachment (an image, audio,
video or PDF file, or any file whose bytes hold a NUL) is kept by its hash and media type,
never by its bytes: the editors link and embed it like a note.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The file kinds Obsidian embeds (images, audio, video, PDF), attachments whatever their
# bytes, with their media types: fixed here, as Python's table differs between versions.
ATTACHMENTS = {
    ".avif": "image/avif",
    ".bmp": "image/bmp",
    ".gif": "image/gif",
    ".jpeg": "image/jpeg",
    ".jpg": "image/jpeg",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".webp": "image/webp",
    ".3gp": "audio/3gpp",
    ".flac": "audio/flac",
    ".m4a": "audio/mp4",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".wav": "audio/wav",
    ".mkv": "video/x-matroska",
    ".mov": "video/quicktime",
    ".mp4": "video/mp4",
    ".ogv": "video/ogg",
    ".webm": "video/webm",
    ".pdf": "application/pdf",
}
# Python's own table only, never the machine's: a media type is the same everywhere.
_MEDIA_TYPES = mimetypes.MimeTypes(filenames=())


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
class Attachment:
    """A file kept by its hash and media type, without its bytes."""

    sha256: str
    media_type: str


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


def read(root: Path, found: Found) -> Text | Attachment | Skipped:
    """The file's text, an attachment, or why it is skipped (unreadable)."""
    try:
        data = (root / found.path).read_bytes()
    except OSError as exc:
        return Skipped(found.path, f"unreadable: {exc.strerror or exc}")
    # A NUL marks a binary file (as git and grep decide), and no text may hold one.
    if PurePosixPath(found.path).suffix.lower() in ATTACHMENTS or b"\x00" in data:
        return Attachment(hashlib.sha256(data).hexdigest(), media_type(found.path))
    return decode(data)


def media_type(path: str) -> str:
    """A file's media type by its suffix (`application/octet-stream` when unknown)."""
    suffix = PurePosixPath(path).suffix.lower()
    guessed, _ = _MEDIA_TYPES.guess_type(path, strict=False)
    return ATTACHMENTS.get(suffix) or guessed or "application/octet-stream"


def decode(data: bytes) -> Text:
    """Bytes as text: invalid UTF-8 is replaced and noted."""
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
