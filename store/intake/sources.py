"""Where intake's files come from: a folder on disk, or files a remote agent sent."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from store.errors import InvalidInputError
from store.intake.walk import Attachment, Found, Skipped, Text, Walked, read, text_hash, walk
from store.limits import MAX_BATCH, check_content


class Source(Protocol):
    def listing(self) -> Walked:
        """The files, by relative path, and what was left out."""
        ...

    def read(self, found: Found) -> Text | Attachment | Skipped:
        """One file's text or, for an attachment, its hash (only asked when its size or
        time changed)."""
        ...


@dataclass(frozen=True)
class FolderSource:
    root: Path

    def listing(self) -> Walked:
        return walk(self.root)

    def read(self, found: Found) -> Text | Attachment | Skipped:
        return read(self.root, found)


@dataclass(frozen=True)
class SentFile:
    path: str
    content: str
    modified_at: datetime | None = None


class SentSource:
    """Files sent as text: the same limits as ingestMany, and paths that stay inside."""

    def __init__(self, files: Sequence[SentFile]) -> None:
        if len(files) > MAX_BATCH:
            raise InvalidInputError(
                f"intakeFolder takes at most {MAX_BATCH} files per call (got {len(files)}); "
                "send the folder in several calls",
                allowed=MAX_BATCH,
            )
        self.files: dict[str, SentFile] = {}
        for sent in files:
            path = checked_path(sent.path)
            if path in self.files:
                raise InvalidInputError(f"file path '{path}' is given twice; give each once")
            check_content(sent.content)
            self.files[path] = sent

    def listing(self) -> Walked:
        found = []
        skipped = []
        for path, sent in sorted(self.files.items()):
            if "\x00" in sent.content:
                skipped.append(Skipped(path, "binary"))
                continue
            size = len(sent.content.encode("utf-8"))
            found.append(Found(path, size, sent.modified_at))
        return Walked(tuple(found), tuple(skipped))

    def read(self, found: Found) -> Text | Skipped:
        content = self.files[found.path].content
        return Text(content, text_hash(content))


def checked_path(path: str) -> str:
    """A sent file's path, relative to the folder and inside it, or a refusal."""
    normal = posixpath.normpath(path.replace("\\", "/")) if path else ""
    if (
        not path
        or normal.startswith(("/", "../"))
        or normal in (".", "..")
        or any(part.startswith(".") for part in normal.split("/"))
    ):
        raise InvalidInputError(
            f"file path '{path[:200]}' is not inside the folder: give a relative path such "
            "as 'notes/a.md', without '..', a leading '/' or hidden ('.') parts"
        )
    return normal
