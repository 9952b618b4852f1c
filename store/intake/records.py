"""What intake writes on records: the folder's, each file's and each part's.

Edge properties are what groups records: the folder's record carries `folder:<name>`
(how a later run finds it) and `folder_id:<id>`; a file's record `folder_id`, `file_id`
and `path` (its relative path: how a person names the note, and a value no other record
holds); a part's record `file_id`. Facts about one record are its metadata, never an edge
property: a file's size, modified time, content hash, title (and an attachment's media
type: it has no parts), a part's index and character offset in the file, and the format
of the content intake itself wrote (a folder's and a file's record). A file's record
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

from policies.properties import MAX_VALUE_LENGTH
from store.ids import random_hex
from store.intake.detect import DETECTORS, Detector, Link
from store.intake.resolve import FileInfo, Unresolved
from store.kinds.record.model import Record
from store.kinds.record.names import FILE_ID as FILE_ID
from store.kinds.record.names import PATH as PATH
from store.kinds.record.names import TITLE

FOLDER = "folder"
FOLDER_ID = "folder_id"
# The edge properties intake writes (a frontmatter never gives them).
LABELS = (FOLDER, FOLDER_ID, FILE_ID, PATH)
# Metadata keys.
SIZE = "size"
MODIFIED = "modified"
SHA256 = "sha256"
MEDIA_TYPE = "media_type"
PART = "part"
OFFSET = "offset"
FORMAT = "format"
# The format of the content of a folder's and a file's record: engine-written JSON, no
# person's text (so no tag is read from it).
FOLDER_FORMAT = "intake/folder"
FILE_FORMAT = "intake/file"
# Edge properties earlier readings wrote for what is metadata now: a record of such a
# reading is rewritten without them.
LEGACY = (SIZE, MODIFIED, SHA256, MEDIA_TYPE, PART, OFFSET)
# How a file's links were read (its record says, under `reading`): a record of an earlier
# reading is read again, as its links may be read otherwise now (and, of a reading before
# 4, its bookkeeping moved from edge properties to metadata).
READING = 4
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


def fact(record: Record, key: str) -> str | None:
    """A metadata value of the record (of a record an earlier reading wrote, the edge
    property that held it then)."""
    found = record.state.metadata.get(key)
    return found if found is not None or key not in LEGACY else value(record, key)


def legacy(record: Record, keeps: Iterable[str] = ()) -> tuple[str, ...]:
    """The labels of the record's edge properties an earlier reading wrote for what is
    metadata now, but those of `keeps` (properties a frontmatter gives it now)."""
    held = {p.label for p in record.state.properties}
    return tuple(sorted(held.intersection(LEGACY).difference(keeps)))


def part_index(record: Record) -> int | None:
    index = fact(record, PART)
    return int(index) if index is not None and index.isdigit() else None


def folder_properties(name: str, folder_id: str) -> tuple[str, ...]:
    return (f"{FOLDER}:{name}", f"{FOLDER_ID}:{folder_id}")


def folder_metadata() -> tuple[str, ...]:
    return (f"{FORMAT}:{FOLDER_FORMAT}",)


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
        return (f"{FOLDER_ID}:{folder_id}", f"{FILE_ID}:{file_id}", f"{PATH}:{self.path}")

    def metadata(self, title: str) -> tuple[str, ...]:
        media = () if self.media_type is None else (f"{MEDIA_TYPE}:{self.media_type}",)
        return (
            f"{SIZE}:{self.size}",
            *modified(self.modified_at),
            f"{SHA256}:{self.sha256}",
            *media,
            *((f"{TITLE}:{title}",) if 0 < len(title.strip()) <= MAX_VALUE_LENGTH else ()),
            f"{FORMAT}:{FILE_FORMAT}",
        )


def modified(at: datetime | None) -> tuple[str, ...]:
    """A file's `modified` metadata (none for a file sent without a time)."""
    return () if at is None else (f"{MODIFIED}:{at.isoformat()}",)


def part_properties(file_id: str) -> tuple[str, ...]:
    return (f"{FILE_ID}:{file_id}",)


def part_metadata(index: int, offset: int) -> tuple[str, ...]:
    return (f"{PART}:{index}", f"{OFFSET}:{offset}")


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
    file_id, path, sha = value(record, FILE_ID), value(record, PATH), fact(record, SHA256)
    if file_id is None or path is None or sha is None:
        return None
    try:
        body = json.loads(record.state.content)
        stated = tuple(body["links"])
        info = FileInfo(path, str(body["title"]), tuple(body["headings"]))
        parts = int(body["parts"])
        size = int(fact(record, SIZE) or "0")
        reading, front = int(body.get("reading", 1)), tuple(map(str, body.get("frontmatter", ())))
    except (ValueError, KeyError, TypeError):
        return None
    modified = fact(record, MODIFIED)
    at = datetime.fromisoformat(modified) if modified else None
    meta = FileMeta(path, size, at, sha, fact(record, MEDIA_TYPE))
    return Described(record, file_id, meta, info, parts, stated, reading, front)
