"""What intake writes on records: the folder's, each file's and each part's.

The folder's record carries `folder:<name>` (how a later run finds it) and
`folder_id:<id>`; a file's record `folder_id`, `file_id`, and its path, size, modified
time and content hash (and an attachment's media type: it has no parts); a part's
record `file_id`, its index and its character offset in the file. A file's record
holds, as JSON content, what a later run needs without reading the file again: its
title, its parts' headings, and the links it states as written, resolved or not, so a
link resolves on a later run once its target exists.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from store.ids import random_hex
from store.intake.detect import DETECTORS, Detector, Link
from store.intake.resolve import FileInfo, Unresolved
from store.kinds.record.model import Record

FOLDER = "folder"
FOLDER_ID = "folder_id"
FILE_ID = "file_id"
PATH = "path"
SIZE = "size"
MODIFIED = "modified"
SHA256 = "sha256"
MEDIA_TYPE = "media_type"
PART = "part"
OFFSET = "offset"
LABELS = (FOLDER, FOLDER_ID, FILE_ID, PATH, SIZE, MODIFIED, SHA256, MEDIA_TYPE, PART, OFFSET)
# How a file's links were read (its record says, under `reading`): a record of an earlier
# reading is read again, as its links may be read otherwise now.
READING = 3
# A file's record keeps at most this many links (the rest are still detected and
# written whenever the file itself is read).
MAX_KEPT_LINKS = 2000
_BY_NAME: Mapping[str, Detector] = {d.name: d for d in DETECTORS}


def new_folder_id() -> str:
    return "fo_" + random_hex()


def new_file_id() -> str:
    return "fi_" + random_hex()


def values(record: Record, label: str) -> list[str]:
    return [p.value for p in record.state.properties if p.label == label]


def value(record: Record, label: str) -> str | None:
    found = values(record, label)
    return found[0] if found else None


def folder_properties(name: str, folder_id: str) -> tuple[str, ...]:
    return (f"{FOLDER}:{name}", f"{FOLDER_ID}:{folder_id}")


def folder_content(name: str, summary: Summary | None = None) -> str:
    body: dict[str, Any] = {"folder": name}
    if summary is not None:
        body |= summary.to_json()
    return json.dumps(body, ensure_ascii=False)


@dataclass(frozen=True)
class Summary:
    """What the folder's last complete run detected, and over which files (a hash of
    their paths and content hashes): a run that finds the same files needs not detect
    again."""

    fingerprint: str
    edges: Mapping[str, int]
    unresolved: tuple[Unresolved, ...]
    skipped: Mapping[str, int]  # links that are no edge of their own, by why

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "edges": dict(sorted(self.edges.items())),
            "unresolved": [[u.path, u.line, u.target, u.reason] for u in self.unresolved],
            "skipped": dict(sorted(self.skipped.items())),
        }


def fingerprint(files: Iterable[tuple[str, str]]) -> str:
    """Of a folder's files by (path, content hash)."""
    digest = hashlib.sha256()
    for path, sha in sorted(files):
        digest.update(f"{path}\x1f{sha}\n".encode())
    return digest.hexdigest()


def summary_of(folder: Record) -> Summary | None:
    try:
        body = json.loads(folder.state.content)
        return Summary(
            str(body["fingerprint"]),
            {str(k): int(v) for k, v in body["edges"].items()},
            tuple(Unresolved(str(p), int(n), str(t), str(r)) for p, n, t, r in body["unresolved"]),
            {str(k): int(v) for k, v in body.get("skipped", {}).items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


@dataclass(frozen=True)
class FileMeta:
    """A file as its record describes it."""

    path: str
    size: int
    modified_at: datetime | None
    sha256: str
    media_type: str | None = None  # an attachment's

    def properties(self, folder_id: str, file_id: str) -> tuple[str, ...]:
        media = () if self.media_type is None else (f"{MEDIA_TYPE}:{self.media_type}",)
        return (
            f"{FOLDER_ID}:{folder_id}",
            f"{FILE_ID}:{file_id}",
            f"{PATH}:{self.path}",
            f"{SIZE}:{self.size}",
            *modified(self.modified_at),
            f"{SHA256}:{self.sha256}",
            *media,
        )


def modified(at: datetime | None) -> tuple[str, ...]:
    """A file's `modified` label (none for a file sent without a time)."""
    return () if at is None else (f"{MODIFIED}:{at.isoformat()}",)


def part_properties(file_id: str, index: int, offset: int) -> tuple[str, ...]:
    return (f"{FILE_ID}:{file_id}", f"{PART}:{index}", f"{OFFSET}:{offset}")


@dataclass(frozen=True)
class Described:
    """A file's record read back: what it says of the file."""

    record: Record
    file_id: str
    meta: FileMeta
    info: FileInfo
    parts: int
    stated: tuple[Mapping[str, Any], ...]  # its links as kept, read when needed
    reading: int = READING
    front: tuple[str, ...] = ()  # the labels its frontmatter gave it

    @functools.cached_property
    def links(self) -> tuple[Link, ...]:
        return tuple(
            Link(
                _BY_NAME[x["detector"]],
                x["target"],
                x["heading"],
                int(x["offset"]),
                int(x["line"]),
                x["quote"],
                int(x["part"]),
            )
            for x in self.stated
        )


def file_content(
    info: FileInfo, parts: int, links: Sequence[Link], front: Sequence[str] = ()
) -> str:
    kept = [
        {
            "detector": link.detector.name,
            "target": link.target,
            "heading": link.heading,
            "offset": link.offset,
            "line": link.line,
            "quote": link.quote,
            "part": link.part,
        }
        for link in links[:MAX_KEPT_LINKS]
    ]
    body: dict[str, Any] = {
        "file": info.path,
        "title": info.title,
        "parts": parts,
        "headings": list(info.headings),
        "links": kept,
        "reading": READING,
        "frontmatter": list(front),
    }
    return json.dumps(body, ensure_ascii=False)


def described(record: Record) -> Described | None:
    """A file's record as intake wrote it; None for any other record."""
    file_id, path, sha = value(record, FILE_ID), value(record, PATH), value(record, SHA256)
    if file_id is None or path is None or sha is None:
        return None
    try:
        body = json.loads(record.state.content)
        stated = tuple(body["links"])
        info = FileInfo(path, str(body["title"]), tuple(body["headings"]))
        parts = int(body["parts"])
        size = int(value(record, SIZE) or "0")
        reading, front = int(body.get("reading", 1)), tuple(map(str, body.get("frontmatter", ())))
    except (ValueError, KeyError, TypeError):
        return None
    modified = value(record, MODIFIED)
    at = datetime.fromisoformat(modified) if modified else None
    meta = FileMeta(path, size, at, sha, value(record, MEDIA_TYPE))
    return Described(record, file_id, meta, info, parts, stated, reading, front)
