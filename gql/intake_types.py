"""The GraphQL shape of folder intake: the files a remote agent sends, and the report."""

from __future__ import annotations

from datetime import datetime

import strawberry

from store.intake import report as domain
from store.intake.sources import SentFile


@strawberry.input(description="One file of a folder, sent as text.")
class FileInput:
    path: str = strawberry.field(description="Relative to the folder, e.g. 'notes/a.md'.")
    content: str
    modified_at: datetime | None = strawberry.field(
        default=None,
        description="When the file last changed; with its size, what lets a later call "
        "leave an unchanged file unread.",
    )

    def to_domain(self) -> SentFile:
        return SentFile(self.path, self.content, self.modified_at)


@strawberry.type(description="A file intake did not read, and why.")
class IntakeSkipped:
    path: str
    reason: str


@strawberry.type(description="A file the policy or a limit refused; the others were written.")
class IntakeRefused:
    path: str
    message: str


@strawberry.type(description="A file whose content moved to a new path: it kept its record.")
class IntakeMove:
    from_: str = strawberry.field(name="from")
    to: str


@strawberry.type(description="How many edges one detector found.")
class DetectorCount:
    detector: str = strawberry.field(description="name@version, e.g. wikilink@1.")
    count: int


@strawberry.type(description="A link that names no file, or several: no edge was made.")
class UnresolvedLink:
    path: str
    line: int
    target: str
    reason: str


@strawberry.type(
    description="What one intake did (with dryRun, would do): records, files and edges."
)
class IntakeReport:
    lane: str
    folder: str
    folder_id: str | None = strawberry.field(description="None on a dry run of a new folder.")
    dry_run: bool
    files: int = strawberry.field(description="Files read or left unchanged.")
    records_written: int
    unchanged: int = strawberry.field(description="Files nothing was written for.")
    not_read: int = strawberry.field(description="Unchanged files whose size and time matched.")
    created: list[str]
    changed: list[str]
    moved: list[IntakeMove]
    removed: list[str]
    retired: int = strawberry.field(description="Records retired (of removed files and parts).")
    skipped: list[IntakeSkipped]
    notes: list[IntakeSkipped] = strawberry.field(description="Files read with a remark.")
    refused: list[IntakeRefused]
    edges: list[DetectorCount] = strawberry.field(description="Detected edges by detector.")
    edges_written: int
    edges_retired: int
    unresolved: list[UnresolvedLink]
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
            edges_retired=r.edges_retired,
            unresolved=[
                UnresolvedLink(path=u.path, line=u.line, target=u.target, reason=u.reason)
                for u in r.unresolved
            ],
            pending=r.pending,
        )
