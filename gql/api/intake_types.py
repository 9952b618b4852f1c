"""The GraphQL shape of folder intake: the files a remote agent sends, and the report."""

from __future__ import annotations

from datetime import datetime

import strawberry

from store.intake import report as domain
from store.intake.sources import SentFile


@strawberry.input(description="One file of a folder, sent as text.")
class FileInput:
    path: str = strawberry.field(description="Relative to the folder, e.g. 'notes/a.md'.")
    content: str = strawberry.field(
        description="The file's whole text (UTF-8); split into parts by heading, or by "
        "size for plain text."
    )
    modified_at: datetime | None = strawberry.field(
        default=None,
        description="When the file last changed; with its size, what lets a later call "
        "leave an unchanged file unread.",
    )

    def to_domain(self) -> SentFile:
        return SentFile(self.path, self.content, self.modified_at)


@strawberry.type(description="A file intake did not read, and why.")
class IntakeSkipped:
    path: str = strawberry.field(description="The file's path relative to the folder.")
    reason: str = strawberry.field(
        description="Why it was not read: binary, unreadable, or a link leaving the folder."
    )


@strawberry.type(description="A file the policy or a limit refused; the others were written.")
class IntakeRefused:
    path: str = strawberry.field(description="The file's path relative to the folder.")
    message: str = strawberry.field(
        description="The refusal, naming what is allowed (as the write itself would answer)."
    )


@strawberry.type(description="A file whose content moved to a new path: it kept its record.")
class IntakeMove:
    from_: str = strawberry.field(name="from", description="The path the file had before.")
    to: str = strawberry.field(description="The file's new path; its record is the same.")


@strawberry.type(description="How many edges one detector found.")
class DetectorCount:
    detector: str = strawberry.field(description="name@version, e.g. wikilink@1.")
    count: int = strawberry.field(description="How many edges it detected in this run.")


@strawberry.type(description="A link that names no file, or several: no edge was made.")
class UnresolvedLink:
    path: str = strawberry.field(description="The file the link is in, relative to the folder.")
    line: int = strawberry.field(description="The line of the link in that file, from 1.")
    target: str = strawberry.field(description="The link's target as written.")
    reason: str = strawberry.field(
        description="Why: no file has this path or file name, or the path leaves the folder; "
        "a later run resolves it once a file matches."
    )


@strawberry.type(description="Links that made no edge of their own, for one reason.")
class SkippedLinks:
    reason: str = strawberry.field(
        description="A second link from its section to the same target, or a link to the "
        "section that holds it."
    )
    count: int = strawberry.field(description="How many links were skipped for it.")


@strawberry.type(
    description="What one intake did (with dryRun, would do): records, files and edges."
)
class IntakeReport:
    lane: str = strawberry.field(description="The lane written in.")
    folder: str = strawberry.field(
        description="The folder's name in memory, which later runs find it by."
    )
    folder_id: str | None = strawberry.field(description="None on a dry run of a new folder.")
    dry_run: bool = strawberry.field(
        description="True when nothing was written and the report says what would be."
    )
    files: int = strawberry.field(description="Files read or left unchanged.")
    records_written: int = strawberry.field(
        description="Records created or given a new version (folder, files, parts)."
    )
    unchanged: int = strawberry.field(description="Files nothing was written for.")
    not_read: int = strawberry.field(description="Unchanged files whose size and time matched.")
    refreshed: int = strawberry.field(
        description="Unchanged files read because their time moved: their record's time was "
        "moved on, so the next call leaves them unread."
    )
    created: list[str] = strawberry.field(description="Paths of files new to memory.")
    changed: list[str] = strawberry.field(
        description="Paths of files whose content changed: a new version of their record."
    )
    moved: list[IntakeMove] = strawberry.field(
        description="Files found under a new path with the same content: each kept its record."
    )
    removed: list[str] = strawberry.field(
        description="Paths of files gone from the folder (of the range the call is "
        "complete for): their records and parts retired."
    )
    retired: int = strawberry.field(description="Records retired (of removed files and parts).")
    skipped: list[IntakeSkipped] = strawberry.field(description="Files not read, each with why.")
    notes: list[IntakeSkipped] = strawberry.field(description="Files read with a remark.")
    refused: list[IntakeRefused] = strawberry.field(
        description="Files the policy or a limit refused; the others were written."
    )
    edges: list[DetectorCount] = strawberry.field(description="Detected edges by detector.")
    edges_written: int = strawberry.field(
        description="Detected typed edges written (new or changed)."
    )
    edges_moved: int = strawberry.field(
        description="Of the edges written, those held already whose link only moved in its "
        "file (the same edge, a new version with the new offset)."
    )
    edges_retired: int = strawberry.field(
        description="Detected edges retired because the link or layout that taught them is gone."
    )
    unresolved: list[UnresolvedLink] = strawberry.field(
        description="Links that name no file or several: no edge made for them."
    )
    links_skipped: list[SkippedLinks] = strawberry.field(
        description="Links found that made no edge of their own, by why: with the detected "
        "wikilink and mdlink edges and the unresolved links, every link found."
    )
    pending: list[str] = strawberry.field(description="What this engine could not write yet.")

    @classmethod
    def from_domain(cls, r: domain.IntakeReport) -> IntakeReport:
        return cls(
            lane=r.lane,
            folder=r.folder,
            folder_id=r.folder_id,
            dry_run=r.dry_run,
            files=r.files,
            records_written=r.records_written,
            unchanged=r.unchanged,
            not_read=r.not_read,
            refreshed=r.refreshed,
            created=r.created,
            changed=r.changed,
            moved=[IntakeMove(from_=a, to=b) for a, b in r.moved],
            removed=r.removed,
            retired=r.retired,
            skipped=[IntakeSkipped(path=s.path, reason=s.reason) for s in r.skipped],
            notes=[IntakeSkipped(path=s.path, reason=s.reason) for s in r.notes],
            refused=[IntakeRefused(path=x.path, message=x.message) for x in r.refused],
            edges=[DetectorCount(detector=d, count=n) for d, n in sorted(r.edges.items())],
            edges_written=r.edges_written,
            edges_moved=r.edges_moved,
            edges_retired=r.edges_retired,
            unresolved=[
                UnresolvedLink(path=u.path, line=u.line, target=u.target, reason=u.reason)
                for u in r.unresolved
            ],
            links_skipped=[
                SkippedLinks(reason=why, count=n) for why, n in sorted(r.links_skipped.items())
            ],
            pending=r.pending,
        )
