"""The detected edges of an intake run: planned per file before the files are written,
written as a later step of each file's transaction, and the rest after every file
(`store.intake.run` gives the order and why)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.intake.detect import Edge, Linked, Ref, link_edges, structure_edges
from store.intake.edges import edge_commands, plan_edges, write_edges
from store.intake.fresh import Fresh
from store.intake.parts import Part
from store.intake.records import PATH, Described, part_index, value
from store.intake.report import IntakeReport
from store.intake.resolve import Resolver
from store.intake.seams import Kinds, LiveEdge
from store.intake.state import FolderState, part_ids
from store.intake.together import Step, Together, Written, joined_locks
from store.kinds.record.locks import Records
from store.kinds.record.model import Record
from store.ledger.command import Command, Locks
from store.reads.snapshot import Reader

Execute = Callable[[Command[Any]], Awaitable[Any]]


@dataclass
class EdgePass:
    """The detected edges of one run: which files they start from, the records of the
    folder's files and parts as the run goes, the step of each file's transaction that
    writes the edges from it, and the pass after every file that writes the rest."""

    kinds: Kinds
    db: Reader
    lane: str
    dry_run: bool
    report: IntakeReport
    execute: Execute
    # The run's own: the records it retires, and the parts of each file it wrote.
    retired_ids: set[str]
    parts_of: dict[str, tuple[Part, ...]]
    # With edges to write: the detected edges by the file they start from, the record
    # of each file and part as known now (those written in this run as they commit),
    # and the records this run retires (their edges are retired with them).
    starting: dict[str, list[Edge]] | None = None
    ids: dict[Ref, str] = field(default_factory=dict)
    doomed: set[str] = field(default_factory=set)
    # The files left as they were and those read that had records, and every record of
    # theirs before this run: what a refused file still is.
    kept: dict[str, Described] = field(default_factory=dict)
    known: dict[str, Described] = field(default_factory=dict)
    before: dict[Ref, str] = field(default_factory=dict)
    # Each file's edges upserted and retired with it, once it is written; and those
    # edges as the files' transactions left them (the reads see the run's start).
    counts: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    wrote: dict[str, tuple[LiveEdge, bool]] = field(default_factory=dict)

    def written(self, path: str, outcome: Written) -> None:
        """A file's transaction committed: files written from now on may have edges to its
        records, and the edges it wrote are as it left them."""
        self.ids.update(refs_of(path, outcome))
        for edge, holds in self.kinds.edges_written(outcome.results):
            self.wrote[edge.id] = (edge, holds)

    async def prepare(
        self,
        detected: list[Edge],
        state: FolderState,
        kept: dict[str, Described],
        read: dict[str, Fresh],
        moves: dict[str, Described],
        gone: dict[str, Described],
        removed: Sequence[str],
    ) -> None:
        """The detected edges by the file they start from, the records of the folder's
        files and parts as they are before this run writes, and those it will retire."""
        if not self.kinds.edges:
            return
        self.starting = {}
        for edge in detected:
            self.starting.setdefault(edge.source.path, []).append(edge)
        paths = {d.file_id: p for p, d in kept.items()}
        self.kept = kept
        self.ids = {Ref(p): d.record.id for p, d in kept.items()}
        for path in read:
            known = state.files.get(path) or moves.get(path)
            if known is not None:
                paths[known.file_id] = path
                self.ids[Ref(path)] = known.record.id
                self.known[path] = known
        leaving = {gone[p].file_id for p in removed}
        self.doomed = {gone[p].record.id for p in removed}
        retiring = self.kinds.retirement
        held = await part_ids(self.db, self.lane, [*paths, *leaving])
        for (of, index), record_id in held.items():
            where = paths.get(of)
            shrunk = where in read and index >= len(read[where].parts)
            if where is not None:
                self.before[Ref(where, index)] = record_id
            if where is None or (retiring and shrunk):
                self.doomed.add(record_id)
            else:
                self.ids[Ref(where, index)] = record_id
        self.before |= {r: i for r, i in self.ids.items() if r.part is None}
        if not retiring:
            self.doomed = set()

    async def step(self, path: str, mine: dict[Ref, str]) -> tuple[tuple[Step, ...], Locks]:
        """The later step of a file's transaction that makes the live detected edges from
        it those detected now, and what that step locks of what exists already.

        `mine`: the file's records that exist before its transaction. The step is
        decided once the file's records are written, with the ids of those it made; an
        edge to a record that does not exist yet, in another file, is left to the pass
        after every file. So are a new file's edges to other files: its transaction
        then locks nothing that exists, so new files are still written in group commits
        (a first intake's speed). An edge touching a record this run retires is retired
        with it, never here."""
        if self.starting is None or self.dry_run:
            return (), Locks()
        detected = self.starting.get(path, [])
        if not mine:
            detected = [e for e in detected if e.target.path == path]
        doomed = self.doomed
        live = [
            e
            for e in await self.kinds.live_edges(self.db, [self.lane], sorted(set(mine.values())))
            if e.from_id not in doomed and e.to_id not in doomed
        ]
        if not detected and not live:
            return (), Locks()
        before = {**self.ids, **mine}
        ahead = [c.locks() for c in edge_commands(plan_edges(detected, before, live), self.kinds)]
        # An edge with one end the file is making locks its other end now.
        ends = set()
        for edge in detected:
            for end, other in ((edge.source, edge.target), (edge.target, edge.source)):
                if end.path == path and end not in before and other in before:
                    ends.add(before[other])
        ahead.append(Records(tuple(sorted(ends))).locks())
        kinds, counts = self.kinds, self.counts

        def edges(results: Sequence[Any]) -> Sequence[Command[Any]]:
            made = dict(refs_of(path, Written(0, list(results))))
            plan = plan_edges(detected, {**before, **made}, live)
            counts[path] = (len(plan.upserts), len(plan.retires), plan.moved)
            return edge_commands(plan, kinds)

        return (edges,), joined_locks(ahead)

    async def write(self, detected: list[Edge], read: dict[str, Fresh]) -> None:
        """After every file: make the live detected edges those detected now (when this
        engine has them). What the files' own transactions wrote is left as it is."""
        if not self.kinds.edges:
            if detected:
                self.report.pending.append(
                    f"{len(detected)} detected edges: this engine has no typed edges yet; a "
                    "later run writes them"
                )
            return
        refused = {r.path for r in self.report.refused}
        ids = {ref: i for ref, i in self.ids.items() if ref.path not in refused}
        # A file refused is as it was: one still at its path keeps its records, and the
        # edges from and to them are those it had (a new or moved one has none here).
        held = {p: d for p in refused if (d := self.known.get(p)) and d.meta.path == p}
        if held:
            read = {p: f for p, f in read.items() if p not in refused}
            detected = detect({**self.kept, **held}, read).edges
            ids |= {ref: i for ref, i in self.before.items() if ref.path in held}
        if self.dry_run:
            # A dry run names the records it would make by what they would hold.
            for path in read:
                if path in refused:
                    continue
                ids.setdefault(Ref(path), f"new:{path}")
                for piece in self.parts_of.get(path, ()):
                    ids.setdefault(Ref(path, piece.index), f"new:{path}#{piece.index}")
        found = await self.kinds.live_edges(self.db, [self.lane], sorted(set(ids.values())))
        live = {e.id: e for e in found}
        for edge_id, (edge, holds) in self.wrote.items():
            if holds:
                live[edge_id] = edge
            else:
                live.pop(edge_id, None)

        async def write(command: Together) -> object:
            return await self.execute(command)

        await write_edges(
            detected,
            ids,
            sorted(live.values(), key=lambda e: e.id),
            self.retired_ids,
            self.kinds,
            write,
            self.report,
            self.dry_run,
        )


def detect(kept: dict[str, Described], read: dict[str, Fresh]) -> Linked:
    """Every edge the folder states or implies, the links that resolve to none, and the
    links skipped."""
    infos = [d.info for d in kept.values()] + [f.info for f in read.values()]
    resolver = Resolver(infos)
    linked = Linked()
    counts: dict[str, int] = {}
    for path in sorted({*kept, *read}):
        if path in read:
            stated, counts[path] = read[path].links, len(read[path].parts)
        else:
            stated, counts[path] = kept[path].links, kept[path].parts
        found = link_edges(path, stated, resolver)
        linked.edges += found.edges
        linked.unresolved += found.unresolved
        linked.skipped += found.skipped
    linked.edges += structure_edges(counts)
    return linked


def refs_of(path: str, written: Written) -> list[tuple[Ref, str]]:
    """The file and parts a file's transaction wrote (not those it retired), by ref."""
    found = []
    for record in records_in(written):
        if record.retirement is not None:
            continue
        part = part_index(record)
        if value(record, PATH) is not None:
            found.append((Ref(path), record.id))
        elif part is not None:
            found.append((Ref(path, part), record.id))
    return found


def records_in(written: Written) -> list[Record]:
    """The records a `Together` wrote, as they now are."""
    found: list[Record] = []
    for result in written.results:
        if isinstance(result, Record):
            found.append(result)
        elif isinstance(result, list):
            found += [r for r in result if isinstance(r, Record)]
    return found
