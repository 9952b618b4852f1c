"""What one intake run did (or, with dry run, would do), and its summary."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from store.errors import BatchItemError
from store.intake.detect import DETECTORS, MDLINK, WIKILINK
from store.intake.resolve import Unresolved
from store.intake.walk import Skipped
from store.printable import printable


def refusal(exc: Exception) -> str:
    """What a refusal says (of a batch's item, the item's own)."""
    cause = exc.cause if isinstance(exc, BatchItemError) else exc
    return str(getattr(cause, "message", cause))


@dataclass(frozen=True)
class Refused:
    """A file the policy (or a limit) refused; the run went on without it."""

    path: str
    message: str


@dataclass
class IntakeReport:
    lane: str
    folder: str
    dry_run: bool
    folder_id: str | None = None
    files: int = 0  # files of the folder intake could read
    records_written: int = 0  # records given a new version (or, dry, that would be)
    unchanged: int = 0  # files nothing was written for
    not_read: int = 0  # of them, files whose size and modified time matched
    refreshed: int = 0  # of them, read and the same: their record's modified time moved on
    created: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)  # (from, to)
    removed: list[str] = field(default_factory=list)
    retired: int = 0  # records retired
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[Skipped] = field(default_factory=list)  # read, with a remark
    refused: list[Refused] = field(default_factory=list)
    edges: Counter[str] = field(default_factory=Counter)  # detected, by detector id
    edges_written: int = 0
    edges_moved: int = 0  # of them, held already and only moved (their offset changed)
    edges_retired: int = 0
    unresolved: list[Unresolved] = field(default_factory=list)
    links_skipped: Counter[str] = field(default_factory=Counter)  # links no edge, by why
    pending: list[str] = field(default_factory=list)  # what this engine cannot write yet
    interrupted: bool = False  # stopped before every file was written

    def summary(self) -> list[str]:
        """The lines the CLI prints at the end, each one line of printable text (a file
        name, a link's target or a message may hold anything)."""
        would = "would be " if self.dry_run else ""
        lines = [
            f"{'dry run: ' if self.dry_run else ''}folder '{self.folder}' in lane '{self.lane}': "
            f"{self.files} files",
            f"records {would}written: {self.records_written}; files unchanged: {self.unchanged} "
            f"({self.not_read} not read, {self.refreshed} with their time {would}refreshed); "
            f"records {would}retired: {self.retired}",
            f"files new: {len(self.created)}, changed: {len(self.changed)}, "
            f"moved: {len(self.moved)}, removed: {len(self.removed)}",
            "edges detected: "
            + ", ".join(f"{d.id} {self.edges.get(d.id, 0)}" for d in DETECTORS)
            + f"; {would}written {self.edges_written} ({self.edges_moved} only moved), "
            f"{would}retired {self.edges_retired}",
            self.links_line(),
        ]
        for old, new in self.moved:
            lines.append(f"moved: {old} -> {new}")
        for s in self.skipped:
            lines.append(f"skipped: {s.path}: {s.reason}")
        for n in self.notes:
            lines.append(f"note: {n.path}: {n.reason}")
        for r in self.refused:
            lines.append(f"refused: {r.path}: {r.message}")
        for u in self.unresolved:
            lines.append(f"unresolved: {u.path}:{u.line}: {u.target} ({u.reason})")
        lines += [f"not written: {p}" for p in self.pending]
        if self.interrupted:
            lines.append("interrupted: the files above were written whole; run again to complete")
        return [printable(line) for line in lines]

    def links_line(self) -> str:
        """Every link found, accounted for: an edge, unresolved, or skipped and why."""
        edges = self.edges.get(WIKILINK.id, 0) + self.edges.get(MDLINK.id, 0)
        skipped = sum(self.links_skipped.values())
        found = edges + len(self.unresolved) + skipped
        why = "".join(f"; {n} {reason}" for reason, n in sorted(self.links_skipped.items()))
        return (
            f"links found: {found}: {edges} edges, {len(self.unresolved)} unresolved, "
            f"{skipped} skipped{why}"
        )
