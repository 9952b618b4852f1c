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

    def covers(self, path: str) -> bool:
        """Whether the listing speaks for `path`: a file of the folder it covers but does
        not list is gone (retired); one it does not cover is left as it is."""
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

    def covers(self, path: str) -> bool:
        return True  # the walk lists the whole folder


@dataclass(frozen=True)
class SentFile:
    path: str
    content: str
    modified_at: datetime | None = None


# How to send a folder of more files than one call takes, in every refusal that says so.
IN_PARTS = (
    f"send the folder in calls of at most {MAX_BATCH} files taken in path order, each with "
    "complete: true, pathsAfter: the previous call's last path (none for the first call) "
    "and pathsThrough: its own last path (none for the last call); each call then retires "
    "the files of its range it does not send, and none of the others"
)


@dataclass(frozen=True)
class Covered:
    """The paths a sent listing speaks for: none (`complete` false: what is not sent is
    left as it is), or every path after `after` and up to `through` (each open when None),
    in code point order (UTF-8 byte order)."""

    complete: bool = False
    after: str | None = None
    through: str | None = None

    def __post_init__(self) -> None:
        if not self.complete and (self.after is not None or self.through is not None):
            raise InvalidInputError(
                "pathsAfter and pathsThrough bound the range of a complete call: give "
                "complete: true with them, or leave them out"
            )
        for name in ("after", "through"):
            bound = getattr(self, name)
            if bound is not None:
                object.__setattr__(self, name, checked_path(bound))
        if self.after is not None and self.through is not None and self.through <= self.after:
            raise InvalidInputError(
                f"pathsThrough '{self.through[:200]}' must sort after pathsAfter "
                f"'{self.after[:200]}'"
            )

    def __contains__(self, path: object) -> bool:
        return (
            isinstance(path, str)
            and self.complete
            and (self.after is None or path > self.after)
            and (self.through is None or path <= self.through)
        )

    def __str__(self) -> str:
        after = "" if self.after is None else f" after '{self.after}'"
        through = "" if self.through is None else f" up to '{self.through}'"
        return f"paths{after}{through}" if after or through else "every path"


class SentSource:
    """Files sent as text: the same limits as ingestMany, and paths that stay inside.

    A call speaks only for the paths `covered` names: a file of the folder it does not
    send is retired only there, so a folder is sent in parts without losing any."""

    def __init__(self, files: Sequence[SentFile], covered: Covered | None = None) -> None:
        if len(files) > MAX_BATCH:
            raise InvalidInputError(
                f"intakeFolder takes at most {MAX_BATCH} files per call (got {len(files)}); "
                f"{IN_PARTS}",
                allowed=MAX_BATCH,
            )
        self.covered = covered or Covered()
        self.files: dict[str, SentFile] = {}
        for sent in files:
            path = checked_path(sent.path)
            if path in self.files:
                raise InvalidInputError(f"file path '{path}' is given twice; give each once")
            if self.covered.complete and path not in self.covered:
                raise InvalidInputError(
                    f"file path '{path}' is outside this call's range ({self.covered}); "
                    "send it in the call whose range holds it"
                )
            if not binary(sent.content):  # skipped, as the folder's walk skips it: never read
                check_content(sent.content)
            self.files[path] = sent

    def listing(self) -> Walked:
        found = []
        skipped = []
        for path, sent in sorted(self.files.items()):
            if binary(sent.content):
                skipped.append(Skipped(path, "binary"))
                continue
            size = len(sent.content.encode("utf-8"))
            found.append(Found(path, size, sent.modified_at))
        return Walked(tuple(found), tuple(skipped))

    def read(self, found: Found) -> Text | Skipped:
        content = self.files[found.path].content
        return Text(content, text_hash(content))

    def covers(self, path: str) -> bool:
        return path in self.covered


def binary(content: str) -> bool:
    """A NUL marks a binary file (`walk.decode` decides a file on disk the same way)."""
    return "\x00" in content


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
