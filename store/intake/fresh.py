"""A file read in an intake run: its text, parts, links and frontmatter."""

from __future__ import annotations

from dataclasses import dataclass

from store.intake.detect import Link, links
from store.intake.frontmatter import Frontmatter, frontmatter
from store.intake.parts import Part, split, title_of
from store.intake.records import LABELS, FileMeta
from store.intake.resolve import FileInfo
from store.intake.walk import Attachment, Found, Text


@dataclass(frozen=True)
class Fresh:
    """A file read in this run."""

    found: Found
    text: Text | Attachment
    parts: tuple[Part, ...]
    info: FileInfo
    links: tuple[Link, ...]
    front: Frontmatter = Frontmatter()

    @property
    def meta(self) -> FileMeta:
        f, text = self.found, self.text
        media = text.media_type if isinstance(text, Attachment) else None
        return FileMeta(f.path, f.size, f.modified_at, text.sha256, media)


def fresh(found: Found, text: Text | Attachment) -> Fresh:
    if isinstance(text, Attachment):
        # Linked and embedded as a note is, without parts or links of its own.
        return Fresh(found, text, (), FileInfo(found.path, title_of(found.path, "")), ())
    parts = split(found.path, text.content)
    front = frontmatter(found.path, text.content, frozenset(LABELS))
    title = front.title or title_of(found.path, text.content)
    info = FileInfo(found.path, title, tuple(p.title for p in parts))
    return Fresh(found, text, parts, info, tuple(links(found.path, text.content, parts)), front)


def same_stat(meta: FileMeta, found: Found) -> bool:
    return (
        found.modified_at is not None
        and meta.modified_at == found.modified_at
        and meta.size == found.size
    )
