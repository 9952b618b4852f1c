"""One intake run: a folder's files become records, through the one executor.

Intake is one more client of the record commands (ingest, update, retire) and the
typed-edge commands. Each file's whole change is one transaction (`Together`): its
record and parts (new, updated, or retired when the file no longer has them), then, as
a later step of the same transaction, the retirement of the detected edges that start
from it and are no longer detected and the upsert of the new ones. A removed file's
record and parts, with every edge attached to them, are retired in one transaction too.
So a run stopped at any point (Ctrl-C, kill -9) leaves every file written whole or not
at all, and the next run completes the rest.

A new file's edges to other files, and an edge to a record that does not exist when
its file is written (a part another changed file is adding), are written after every
file instead, in one transaction per file they start from, with the edges that change
although their file did not (a link of an unchanged file that now resolves, the chain
of a directory that gained a file): a new file's transaction then locks nothing that
exists, so new files share the executor's group commits. A run stopped before then
leaves them to the next, which detects again because the folder's summary was not
written. A dry run asks each command for its decision and writes nothing, so it
reports what a run would write, refusals included.

Re-runs are incremental: a file whose size and modified time match its record is not
read; one whose content hash matches gets only its record's modified time moved on (a
new version of its `modified` label alone), so the next run does not read it again; a
changed file gets a new version of its record and its parts are updated, added or
retired; a file whose content moved to a new path keeps its record; a removed file's
records are retired. A file is removed when the source covers its path but does not list
it (`Source.covers`): a folder's walk covers every path, a call sending files only the
range it says it is complete for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from policies.errors import LaneForbiddenError, PolicyError
from policies.model import Policy
from store.errors import StoreError
from store.ids import RECORD_KIND
from store.intake.detect import Edge, Link, Linked, Ref, link_edges, links, structure_edges
from store.intake.edges import edge_commands, plan_edges, write_edges
from store.intake.frontmatter import Frontmatter, frontmatter
from store.intake.parts import Part, split, title_of
from store.intake.records import (
    LABELS,
    OFFSET,
    PATH,
    READING,
    Described,
    FileMeta,
    Summary,
    file_content,
    fingerprint,
    folder_content,
    folder_metadata,
    folder_properties,
    legacy,
    modified,
    new_file_id,
    new_folder_id,
    part_index,
    part_metadata,
    part_properties,
    summary_of,
    value,
)
from store.intake.report import IntakeReport, Refused, refusal
from store.intake.resolve import FileInfo, Resolver
from store.intake.seams import KINDS, Kinds, LiveEdge
from store.intake.sources import Source
from store.intake.state import FolderState, folder_state, part_ids, parts_of
from store.intake.together import RETIRED, Step, Together, Written, joined_locks
from store.intake.walk import Attachment, Found, Skipped, Text
from store.kinds.policy.in_force import PolicyVersion
from store.kinds.record.commands import Ingest, NewRecord, RemoveProperties, Update
from store.kinds.record.model import Record
from store.ledger.command import Command, Current, Locks, Txn
from store.limits import MAX_BATCH
from store.reads.snapshot import Reader

Execute = Callable[[Command[Any]], Awaitable[Any]]
Progress = Callable[[int, int], None]
DEFAULT_SOURCE_TYPE = "documentary"
# Files written at once: enough to fill the executor's group commits.
WRITERS = 8
# Records whose time one transaction moves on.
REFRESH_BATCH = 100
# The name of a folder sent without one (the CLI names it after the folder itself).
DEFAULT_FOLDER = "folder"


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


def source_type_for(policy: Policy, lane: str) -> str:
    """`documentary`, unless the lane is closed to it: then the first enabled source type
    that allows every label intake writes (the guard refuses any other choice)."""
    declared = policy.lanes.get(lane)
    if declared is None or declared.is_open or declared.enabled_source_type(DEFAULT_SOURCE_TYPE):
        return DEFAULT_SOURCE_TYPE
    for name in declared.enabled_source_types():
        allowed = set(declared.source_types[name].allowed_labels())
        if allowed.issuperset(LABELS):
            return name
    return DEFAULT_SOURCE_TYPE


def _same_stat(meta: FileMeta, found: Found) -> bool:
    return (
        found.modified_at is not None
        and meta.modified_at == found.modified_at
        and meta.size == found.size
    )


@dataclass
class Intake:
    """One run over one folder of one lane, as one agent."""

    source: Source
    lane: str
    folder: str
    agent: str
    policy: PolicyVersion
    db: Reader
    execute: Execute
    dry_run: bool = False
    progress: Progress | None = None
    kinds: Kinds = KINDS
    # Set to stop: the files being written are finished, no other is begun.
    stop: asyncio.Event | None = None
    report: IntakeReport = field(init=False)
    folder_record: Record | None = field(init=False, default=None)
    retired_ids: set[str] = field(init=False, default_factory=set)
    _parts_of: dict[str, tuple[Part, ...]] = field(init=False, default_factory=dict)
    # With edges to write: the detected edges by the file they start from, the record
    # of each file and part as known now (those written in this run as they commit),
    # and the records this run retires (their edges are retired with them).
    _from: dict[str, list[Edge]] | None = field(init=False, default=None)
    _ids: dict[Ref, str] = field(init=False, default_factory=dict)
    _doomed: set[str] = field(init=False, default_factory=set)
    # The files left as they were and those read that had records, and every record of
    # theirs before this run: what a refused file still is.
    _kept: dict[str, Described] = field(init=False, default_factory=dict)
    _known: dict[str, Described] = field(init=False, default_factory=dict)
    _before: dict[Ref, str] = field(init=False, default_factory=dict)
    # Each file's edges upserted and retired with it, once it is written; and those
    # edges as the files' transactions left them (the reads see the run's start).
    _edge_counts: dict[str, tuple[int, int, int]] = field(init=False, default_factory=dict)
    _wrote: dict[str, tuple[LiveEdge, bool]] = field(init=False, default_factory=dict)
    # Files read whose content is that of their record, though their time moved on.
    _stale: dict[str, Found] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.report = IntakeReport(self.lane, self.folder, self.dry_run)
        self.source_type = source_type_for(self.policy.policy, self.lane)

    async def run(self) -> IntakeReport:
        self._check_access()
        report = self.report
        listing = self.source.listing()
        report.skipped += listing.skipped
        state = await folder_state(self.db, self.lane, self.folder)
        kept, read = self._read(listing.files, state)
        report.files = len(kept) + len(read)
        report.unchanged = len(kept)
        listed = {f.path for f in listing.files} | {s.path for s in listing.skipped}
        unlisted = {p: d for p, d in state.files.items() if p not in listed}
        gone = {p: d for p, d in unlisted.items() if self.source.covers(p)}
        # What the source does not speak for stays as it is, and is part of the folder
        # its edges are detected over.
        kept |= {p: d for p, d in unlisted.items() if p not in gone}
        moves = self._moves(read, state, gone)
        removed = sorted(p for p in gone if p not in {d.meta.path for d in moves.values()})
        stored = None if state.folder is None else summary_of(state.folder)
        same = fingerprint((p, d.meta.sha256) for p, d in kept.items())
        detected: list[Edge] | None = None
        if not read and not removed and stored is not None and stored.fingerprint == same:
            # The files the last complete run saw, unchanged: so is what it detected.
            report.edges.update(stored.edges)
            report.unresolved += stored.unresolved
            report.links_skipped.update(stored.skipped)
        else:
            detected = self._detect(kept, read)

        folder_id = state.folder_id or await self._new_folder()
        # A dry run of a new folder makes up an id it never writes: it is not reported.
        report.folder_id = state.folder_id if self.dry_run else folder_id
        if detected is not None:
            await self._prepare_edges(detected, state, kept, read, moves, gone, removed)
        total, done = len(read) + len(removed), 0
        # Files are written side by side (each in its own transaction; those that only
        # add records share the executor's group commits) and reported in path order.
        gate = asyncio.Semaphore(WRITERS)

        async def write(path: str) -> Written | Refused | None:
            nonlocal done
            async with gate:
                if self.stopping():
                    return None
                known = state.files.get(path) or moves.get(path)
                try:
                    outcome = await self._write_file(read[path], known, folder_id)
                except (PolicyError, StoreError) as exc:
                    return Refused(path, refusal(exc))
                finally:
                    done += 1
                    self._progress(done, total)
                # Files written from now on may have edges to this one's records.
                self._ids.update(refs_of(path, outcome))
                for edge, holds in self.kinds.edges_written(outcome.results):
                    self._wrote[edge.id] = (edge, holds)
                return outcome

        outcomes = await asyncio.gather(*(write(path) for path in sorted(read)))
        for path, outcome in zip(sorted(read), outcomes, strict=True):
            known = state.files.get(path) or moves.get(path)
            if outcome is None:
                continue
            if isinstance(outcome, Refused):
                report.refused.append(outcome)
                continue
            report.records_written += outcome.count - outcome.retired
            upserted, retired, moved = self._edge_counts.get(path, (0, 0, 0))
            report.edges_written += upserted
            report.edges_moved += moved
            report.edges_retired += retired
            if known is None:
                report.created.append(path)
            elif known.meta.path != path:
                report.moved.append((known.meta.path, path))
            else:
                report.changed.append(path)
        await self._refresh(kept)
        for path in removed:
            if self.stopping():
                break
            try:
                await self._retire_file(gone[path])
            except (PolicyError, StoreError) as exc:
                report.refused.append(Refused(path, refusal(exc)))
            else:
                report.removed.append(path)
            done += 1
            self._progress(done, total)
        if self.stopping():
            report.interrupted = True
            return report
        if detected is not None:
            await self._edges(detected, read)
        await self._summarise(state, kept, read)
        return report

    def _check_access(self) -> None:
        """Intake reads what it wrote before: it needs to read and write the lane."""
        rules = self.policy.policy
        rules.lane(self.lane)
        profile = rules.agent(self.agent)
        if not profile.can_read(self.lane):
            raise LaneForbiddenError(self.agent, self.lane, "read", profile.readable_lanes(rules))
        if not profile.can_write(self.lane):
            raise LaneForbiddenError(self.agent, self.lane, "write", profile.writable_lanes(rules))

    def stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def _progress(self, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(done, total)

    def _read(
        self, files: Sequence[Found], state: FolderState
    ) -> tuple[dict[str, Described], dict[str, Fresh]]:
        """The files left as they were, and those read (new or changed)."""
        kept: dict[str, Described] = {}
        read: dict[str, Fresh] = {}
        for found in files:
            known = state.files.get(found.path)
            # A record of an earlier reading is read again and rewritten, content the same.
            if known is not None and known.reading == READING and _same_stat(known.meta, found):
                kept[found.path] = known
                self.report.not_read += 1
                continue
            text = self.source.read(found)
            if isinstance(text, Skipped):
                self.report.skipped.append(text)
                continue
            if isinstance(text, Text) and text.note is not None:
                self.report.notes.append(Skipped(found.path, text.note))
            if known is not None and known.reading == READING and known.meta.sha256 == text.sha256:
                kept[found.path] = known
                if found.modified_at is not None:
                    self._stale[found.path] = found
                continue
            read[found.path] = fresh(found, text)
            self.report.notes += [Skipped(found.path, n) for n in read[found.path].front.notes]
        return kept, read

    @staticmethod
    def _moves(
        read: dict[str, Fresh], state: FolderState, gone: dict[str, Described]
    ) -> dict[str, Described]:
        """New paths whose content is that of a file no longer at its path: moved."""
        by_hash: dict[str, list[Described]] = {}
        for path in sorted(gone):
            by_hash.setdefault(gone[path].meta.sha256, []).append(gone[path])
        moves = {}
        for path in sorted(read):
            candidates = by_hash.get(read[path].text.sha256)
            if path not in state.files and candidates:
                moves[path] = candidates.pop(0)
        return moves

    def _detect(self, kept: dict[str, Described], read: dict[str, Fresh]) -> list[Edge]:
        """Every edge the folder states or implies now; unresolved links reported."""
        linked = detect(kept, read)
        self.report.unresolved += linked.unresolved
        self.report.links_skipped += linked.skipped
        self.report.edges.update(e.detector.id for e in linked.edges)
        return linked.edges

    async def _new_folder(self) -> str:
        folder_id = new_folder_id()
        record = NewRecord(
            folder_content(self.folder),
            folder_properties(self.folder, folder_id),
            self.source_type,
            self.lane,
            metadata=folder_metadata(),
        )
        command = Together((Ingest((record,)),))
        if self.dry_run:
            self.report.records_written += (await self._run(command, {})).count
        else:
            written: Written = await self.execute(command)
            self.report.records_written += written.count
            [[self.folder_record]] = written.results
        return folder_id

    async def _prepare_edges(
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
        self._from = {}
        for edge in detected:
            self._from.setdefault(edge.source.path, []).append(edge)
        paths = {d.file_id: p for p, d in kept.items()}
        self._kept = kept
        self._ids = {Ref(p): d.record.id for p, d in kept.items()}
        for path in read:
            known = state.files.get(path) or moves.get(path)
            if known is not None:
                paths[known.file_id] = path
                self._ids[Ref(path)] = known.record.id
                self._known[path] = known
        leaving = {gone[p].file_id for p in removed}
        self._doomed = {gone[p].record.id for p in removed}
        retiring = self.kinds.retirement
        held = await part_ids(self.db, self.lane, [*paths, *leaving])
        for (of, index), record_id in held.items():
            where = paths.get(of)
            shrunk = where in read and index >= len(read[where].parts)
            if where is not None:
                self._before[Ref(where, index)] = record_id
            if where is None or (retiring and shrunk):
                self._doomed.add(record_id)
            else:
                self._ids[Ref(where, index)] = record_id
        self._before |= {r: i for r, i in self._ids.items() if r.part is None}
        if not retiring:
            self._doomed = set()

    async def _edge_step(self, path: str, mine: dict[Ref, str]) -> tuple[tuple[Step, ...], Locks]:
        """The later step of a file's transaction that makes the live detected edges from
        it those detected now, and what that step locks of what exists already.

        `mine`: the file's records that exist before its transaction. The step is
        decided once the file's records are written, with the ids of those it made; an
        edge to a record that does not exist yet, in another file, is left to the pass
        after every file. So are a new file's edges to other files: its transaction
        then locks nothing that exists, so new files are still written in group commits
        (a first intake's speed). An edge touching a record this run retires is retired
        with it, never here."""
        if self._from is None or self.dry_run:
            return (), Locks()
        detected = self._from.get(path, [])
        if not mine:
            detected = [e for e in detected if e.target.path == path]
        doomed = self._doomed
        live = [
            e
            for e in await self.kinds.live_edges(self.db, [self.lane], sorted(set(mine.values())))
            if e.from_id not in doomed and e.to_id not in doomed
        ]
        if not detected and not live:
            return (), Locks()
        before = {**self._ids, **mine}
        ahead = [c.locks() for c in edge_commands(plan_edges(detected, before, live), self.kinds)]
        # An edge with one end the file is making locks its other end now.
        ends = set()
        for edge in detected:
            for end, other in ((edge.source, edge.target), (edge.target, edge.source)):
                if end.path == path and end not in before and other in before:
                    ends.add(before[other])
        ahead.append(Locks(records=tuple(sorted(ends))))
        kinds, counts = self.kinds, self._edge_counts

        def edges(results: Sequence[Any]) -> Sequence[Command[Any]]:
            made = dict(refs_of(path, Written(0, list(results))))
            plan = plan_edges(detected, {**before, **made}, live)
            counts[path] = (len(plan.upserts), len(plan.retires), plan.moved)
            return edge_commands(plan, kinds)

        return (edges,), joined_locks(ahead)

    async def _edges(self, detected: list[Edge], read: dict[str, Fresh]) -> None:
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
        ids = {ref: i for ref, i in self._ids.items() if ref.path not in refused}
        # A file refused is as it was: one still at its path keeps its records, and the
        # edges from and to them are those it had (a new or moved one has none here).
        held = {p: d for p in refused if (d := self._known.get(p)) and d.meta.path == p}
        if held:
            read = {p: f for p, f in read.items() if p not in refused}
            detected = detect({**self._kept, **held}, read).edges
            ids |= {ref: i for ref, i in self._before.items() if ref.path in held}
        if self.dry_run:
            # A dry run names the records it would make by what they would hold.
            for path in read:
                if path in refused:
                    continue
                ids.setdefault(Ref(path), f"new:{path}")
                for piece in self._parts_of.get(path, ()):
                    ids.setdefault(Ref(path, piece.index), f"new:{path}#{piece.index}")
        found = await self.kinds.live_edges(self.db, [self.lane], sorted(set(ids.values())))
        live = {e.id: e for e in found}
        for edge_id, (edge, holds) in self._wrote.items():
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

    async def _refresh(self, kept: dict[str, Described]) -> None:
        """Move on the modified time of the files read and found the same (every file a
        checkout touched): a version of each record's `modified` metadata alone, so the
        ledger stays the one account of what intake saw, and the next run reads none of
        them. A time is no part of a file's content: many records are moved on in one
        transaction, and a batch refused is tried again file by file."""
        gate = asyncio.Semaphore(WRITERS)

        async def refresh(paths: Sequence[str]) -> None:
            records = {kept[p].record.id: kept[p].record for p in paths}
            updates = tuple(
                Update(kept[p].record.id, metadata=modified(self._stale[p].modified_at))
                for p in paths
            )
            async with gate:
                if self.stopping():
                    return
                try:
                    written = await self._run(Together(updates), records)
                except (PolicyError, StoreError) as exc:
                    refused: Exception | None = exc
                else:
                    refused = None
            if refused is None:
                self.report.records_written += written.count
                self.report.refreshed += len(paths)
            elif len(paths) > 1:
                await asyncio.gather(*(refresh([p]) for p in paths))
            else:
                # The file is as its record says: only its next run reads it again.
                why = f"its modified time was not refreshed: {refusal(refused)}"
                self.report.notes.append(Skipped(paths[0], why))

        stale = sorted(self._stale)
        batches = [stale[n : n + REFRESH_BATCH] for n in range(0, len(stale), REFRESH_BATCH)]
        await asyncio.gather(*(refresh(batch) for batch in batches))

    async def _summarise(
        self, state: FolderState, kept: dict[str, Described], read: dict[str, Fresh]
    ) -> None:
        """Keep on the folder's record what this run detected, over which files."""
        refused = {r.path for r in self.report.refused}
        written = [(p, f.text.sha256) for p, f in read.items() if p not in refused]
        summary = Summary(
            fingerprint([*((p, d.meta.sha256) for p, d in kept.items()), *written]),
            dict(self.report.edges),
            tuple(self.report.unresolved),
            dict(self.report.links_skipped),
        )
        content = folder_content(self.folder, summary)
        if state.folder is None:
            # A new folder's record is written first; its summary follows, as a new version.
            if self.dry_run:
                self.report.records_written += 1
                return
            assert self.folder_record is not None
            folder = self.folder_record
        else:
            folder = state.folder
        command = Together((Update(folder.id, content, metadata=folder_metadata()),))
        self.report.records_written += (await self._run(command, {folder.id: folder})).count

    async def _write_file(self, f: Fresh, known: Described | None, folder_id: str) -> Written:
        """A file's records and the detected edges from it, in one transaction."""
        path = f.meta.path
        content = file_content(f.info, len(f.parts), f.links, f.front.labels)
        self._parts_of[path] = f.parts
        facts = f.meta.metadata(f.info.title)
        if known is None:
            file_id = new_file_id()
            props = f.meta.properties(folder_id, file_id) + f.front.properties
            inputs = [NewRecord(content, props, *self._where, metadata=facts)]
            inputs += [self._new_part(file_id, p) for p in f.parts]
            then, ahead = await self._edge_step(path, {})
            return await self._run(Together(_ingests(inputs), then, ahead), {})
        file_id = known.file_id
        props = f.meta.properties(folder_id, file_id) + f.front.properties
        commands: list[Command[Any]] = [Update(known.record.id, content, props, metadata=facts)]
        records = {known.record.id: known.record}
        mine = {Ref(path): known.record.id}
        held = await parts_of(self.db, self.lane, file_id)
        added = []
        # Edge properties an earlier reading wrote for what is metadata now, by record:
        # they go once the record is updated.
        dropped = {known.record.id: legacy(known.record, f.front.labels)}
        for part in f.parts:
            old = held.get(part.index)
            if old is None:
                added.append(self._new_part(file_id, part))
                continue
            mine[Ref(path, part.index)] = old.id
            dropped[old.id] = legacy(old)
            if (
                old.state.content != part.text
                or old.state.metadata.get(OFFSET) != str(part.start)
                or dropped[old.id]
            ):
                facts = part_metadata(part.index, part.start)
                commands.append(Update(old.id, part.text, part_properties(file_id), metadata=facts))
                records[old.id] = old
        commands += _ingests(added)
        # Parts the file no longer has are retired with it, and with them whatever is
        # attached to them (their typed edges).
        extra = [r for n, r in sorted(held.items()) if n >= len(f.parts)]
        retiring = self._retirement(path, extra)
        if retiring is not None:
            commands.append(retiring)
            records |= {r.id: r for r in extra}
        then, ahead = await self._edge_step(path, mine)
        # Keys the frontmatter no longer has: their properties go too.
        dropped[known.record.id] += tuple(sorted(set(known.front) - set(f.front.labels)))
        removals = [RemoveProperties(i, labels=labels) for i, labels in dropped.items() if labels]
        if removals:
            then = (lambda _: removals, *then)
        written = await self._run(Together(tuple(commands), then, ahead), records)
        self._retired(extra if retiring is not None else [])
        return written

    @property
    def _where(self) -> tuple[str, str]:
        return (self.source_type, self.lane)

    def _new_part(self, file_id: str, part: Part) -> NewRecord:
        facts = part_metadata(part.index, part.start)
        return NewRecord(part.text, part_properties(file_id), *self._where, metadata=facts)

    def _retirement(self, path: str, gone: Sequence[Record]) -> Command[Any] | None:
        """The command retiring these records (and, with them, their typed edges)."""
        if not gone:
            return None
        if not self.kinds.retirement:
            self.report.pending.append(
                f"{len(gone)} records of {path}: this engine cannot retire records yet"
            )
            return None
        reason = f"intake: {path} no longer holds it"
        return self.kinds.retire_records(tuple(r.id for r in gone), reason)

    def _retired(self, gone: Sequence[Record]) -> None:
        self.report.retired += len(gone)
        self.retired_ids.update(r.id for r in gone)

    async def _retire_file(self, known: Described) -> None:
        """A removed file: its parts and its record, with every edge attached to them, in
        one transaction."""
        held = await parts_of(self.db, self.lane, known.file_id)
        gone = [*held.values(), known.record]
        command = self._retirement(known.meta.path, gone)
        if command is None:
            return
        if not self.dry_run:
            await self.execute(command)
        self._retired(gone)

    async def _run(self, command: Together, records: dict[str, Record]) -> Written:
        """Write `command` (dry: only decide its first step, as the executor would)."""
        if not self.dry_run:
            written: Written = await self.execute(command)
            return written
        txn = Txn(self.agent, self.policy, datetime.now(UTC))
        plan = command.decide(txn, Current(records=records, first_writes={}, heads={}))
        ours = [w for w in plan.writes if w.kind == RECORD_KIND]
        return Written(len(ours), [], sum(w.event == RETIRED for w in ours))


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


def _ingests(inputs: Sequence[NewRecord]) -> tuple[Command[Any], ...]:
    return tuple(Ingest(tuple(inputs[n : n + MAX_BATCH])) for n in range(0, len(inputs), MAX_BATCH))
