"""One intake run: a folder's files become records, through the one executor.

Intake is one more client of the record commands (ingest, update, retire) and the
typed-edge commands: each file's record and its parts are decided and written together
(`Together`), one transaction per file, so a run stopped at any point (Ctrl-C, kill -9)
leaves every file written whole or not at all and the next run completes the rest. A
dry run asks each command for its decision and writes nothing, so it reports what a
run would write, refusals included.

Re-runs are incremental: a file whose size and modified time match its record is not
read; one whose content hash matches writes nothing; a changed file gets a new version
of its record and its parts are updated, added or retired; a file whose content moved
to a new path keeps its record; a removed file's records are retired.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from policies.errors import LaneForbiddenError, PolicyError
from policies.model import Policy
from store.errors import BatchItemError, StoreError
from store.ids import RECORD_KIND
from store.intake.detect import (
    Edge,
    FileInfo,
    Link,
    Ref,
    Resolver,
    link_edges,
    links,
    structure_edges,
)
from store.intake.edges import write_edges
from store.intake.parts import Part, split, title_of
from store.intake.records import (
    FILE_ID,
    LABELS,
    OFFSET,
    PART,
    PATH,
    Described,
    FileMeta,
    Summary,
    file_content,
    fingerprint,
    folder_content,
    folder_properties,
    new_file_id,
    new_folder_id,
    part_properties,
    summary_of,
    value,
)
from store.intake.report import IntakeReport, Refused
from store.intake.seams import KINDS, Kinds
from store.intake.sources import Source
from store.intake.state import FolderState, folder_state, part_ids, parts_of
from store.intake.together import Together, Written
from store.intake.walk import Found, Skipped, Text
from store.kinds.policy.in_force import PolicyVersion
from store.kinds.record.commands import Ingest, NewRecord, Update
from store.kinds.record.model import Record
from store.ledger.command import Command, Current, Txn
from store.limits import MAX_BATCH
from store.reads.snapshot import Reader

Execute = Callable[[Command[Any]], Awaitable[Any]]
Progress = Callable[[int, int], None]
DEFAULT_SOURCE_TYPE = "documentary"
# Files written at once: enough to fill the executor's group commits.
WRITERS = 8
# The name of a folder sent without one (the CLI names it after the folder itself).
DEFAULT_FOLDER = "folder"


@dataclass(frozen=True)
class Fresh:
    """A file read in this run."""

    found: Found
    text: Text
    parts: tuple[Part, ...]
    info: FileInfo
    links: tuple[Link, ...]

    @property
    def meta(self) -> FileMeta:
        f = self.found
        return FileMeta(f.path, f.size, f.modified_at, self.text.sha256)


def fresh(found: Found, text: Text) -> Fresh:
    parts = split(found.path, text.content)
    info = FileInfo(found.path, title_of(found.path, text.content), tuple(p.title for p in parts))
    return Fresh(found, text, parts, info, tuple(links(found.path, text.content, parts)))


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


def refusal(exc: Exception) -> str:
    cause = exc.cause if isinstance(exc, BatchItemError) else exc
    return str(getattr(cause, "message", cause))


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
        gone = {p: d for p, d in state.files.items() if p not in listed}
        moves = self._moves(read, state, gone)
        removed = sorted(p for p in gone if p not in {d.meta.path for d in moves.values()})
        stored = None if state.folder is None else summary_of(state.folder)
        same = fingerprint((p, d.meta.sha256) for p, d in kept.items())
        detected: list[Edge] | None = None
        if not read and not removed and stored is not None and stored.fingerprint == same:
            # The files the last complete run saw, unchanged: so is what it detected.
            report.edges.update(stored.edges)
            report.unresolved += stored.unresolved
        else:
            detected = self._detect(kept, read)

        folder_id = state.folder_id or await self._new_folder()
        # A dry run of a new folder makes up an id it never writes: it is not reported.
        report.folder_id = state.folder_id if self.dry_run else folder_id
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
                    return await self._write_file(read[path], known, folder_id)
                except (PolicyError, StoreError) as exc:
                    return Refused(path, refusal(exc))
                finally:
                    done += 1
                    self._progress(done, total)

        outcomes = await asyncio.gather(*(write(path) for path in sorted(read)))
        written: list[Record] = []
        for path, outcome in zip(sorted(read), outcomes, strict=True):
            known = state.files.get(path) or moves.get(path)
            if outcome is None:
                continue
            if isinstance(outcome, Refused):
                report.refused.append(outcome)
                continue
            report.records_written += outcome.count
            written += records_in(outcome)
            if known is None:
                report.created.append(path)
            elif known.meta.path != path:
                report.moved.append((known.meta.path, path))
            else:
                report.changed.append(path)
        for path in removed:
            if self.stopping():
                break
            report.removed.append(path)
            await self._retire_file(gone[path])
            done += 1
            self._progress(done, total)
        if self.stopping():
            report.interrupted = True
            return report
        if detected is not None:
            known_of = {p: k for p in read if (k := state.files.get(p) or moves.get(p))}
            await self._edges(detected, known_of, kept, read, written)
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
            if known is not None and _same_stat(known.meta, found):
                kept[found.path] = known
                self.report.not_read += 1
                continue
            text = self.source.read(found)
            if isinstance(text, Skipped):
                self.report.skipped.append(text)
                continue
            if text.note is not None:
                self.report.notes.append(Skipped(found.path, text.note))
            if known is not None and known.meta.sha256 == text.sha256:
                kept[found.path] = known
                continue
            read[found.path] = fresh(found, text)
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
        infos = [d.info for d in kept.values()] + [f.info for f in read.values()]
        resolver = Resolver(infos)
        edges: list[Edge] = []
        counts: dict[str, int] = {}
        for path in sorted({*kept, *read}):
            if path in read:
                stated, counts[path] = read[path].links, len(read[path].parts)
            else:
                stated, counts[path] = kept[path].links, kept[path].parts
            found, unresolved = link_edges(path, stated, resolver)
            edges += found
            self.report.unresolved += unresolved
        edges += structure_edges(counts)
        self.report.edges.update(e.detector.id for e in edges)
        return edges

    async def _new_folder(self) -> str:
        folder_id = new_folder_id()
        record = NewRecord(
            folder_content(self.folder),
            folder_properties(self.folder, folder_id),
            self.source_type,
            self.lane,
        )
        command = Together((Ingest((record,)),))
        if self.dry_run:
            self.report.records_written += (await self._run(command, {})).count
        else:
            written: Written = await self.execute(command)
            self.report.records_written += written.count
            [[self.folder_record]] = written.results
        return folder_id

    async def _edges(
        self,
        detected: list[Edge],
        known_of: dict[str, Described],
        kept: dict[str, Described],
        read: dict[str, Fresh],
        written: list[Record],
    ) -> None:
        """Make the live detected edges those detected now (when this engine has them)."""
        if not self.kinds.edges:
            if detected:
                self.report.pending.append(
                    f"{len(detected)} detected edges: this engine has no typed edges yet; a "
                    "later run writes them"
                )
            return
        refused = {r.path for r in self.report.refused}
        ids = await self._ids(known_of, kept, [p for p in read if p not in refused], written)
        live = await self.kinds.live_edges(self.db, [self.lane], sorted(set(ids.values())))

        async def write(command: Together) -> object:
            return await self.execute(command)

        await write_edges(
            detected, ids, live, self.retired_ids, self.kinds, write, self.report, self.dry_run
        )

    async def _ids(
        self,
        known_of: dict[str, Described],
        kept: dict[str, Described],
        read: list[str],
        written: list[Record],
    ) -> dict[Ref, str]:
        """The record of each file and part of the folder as it is after this run (a dry
        run names the records it would make by what they would hold)."""
        paths = {d.file_id: p for p, d in kept.items()}
        ids: dict[Ref, str] = {Ref(p): d.record.id for p, d in kept.items()}
        for path in read:
            known = known_of.get(path)
            if known is not None:
                paths[known.file_id] = path
                ids[Ref(path)] = known.record.id
        for record in written:
            of, where = value(record, FILE_ID), value(record, PATH)
            if of is not None and where is not None:
                paths[of] = where
                ids[Ref(where)] = record.id
        held = await part_ids(self.db, self.lane, list(paths))
        for (of, index), record_id in held.items():
            if record_id not in self.retired_ids:
                ids[Ref(paths[of], index)] = record_id
        for record in written:
            of, number = value(record, FILE_ID), value(record, PART)
            if of in paths and number is not None:
                ids[Ref(paths[of], int(number))] = record.id
        if self.dry_run:
            for path in read:
                ids.setdefault(Ref(path), f"new:{path}")
                for piece in self._parts_of.get(path, ()):
                    ids.setdefault(Ref(path, piece.index), f"new:{path}#{piece.index}")
        return ids

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
        command = Together((Update(folder.id, content),))
        self.report.records_written += (await self._run(command, {folder.id: folder})).count

    async def _write_file(self, f: Fresh, known: Described | None, folder_id: str) -> Written:
        """A file's record and parts, in one transaction; how many records it writes."""
        content = file_content(f.info, len(f.parts), f.links)
        self._parts_of[f.meta.path] = f.parts
        if known is None:
            file_id = new_file_id()
            inputs = [NewRecord(content, f.meta.properties(folder_id, file_id), *self._where)]
            inputs += [self._new_part(file_id, p) for p in f.parts]
            return await self._run(Together(_ingests(inputs)), {})
        file_id = known.file_id
        commands: list[Command[Any]] = [
            Update(known.record.id, content, f.meta.properties(folder_id, file_id))
        ]
        records = {known.record.id: known.record}
        held = await parts_of(self.db, self.lane, file_id)
        added = []
        for part in f.parts:
            old = held.get(part.index)
            if old is None:
                added.append(self._new_part(file_id, part))
            elif old.state.content != part.text or value(old, OFFSET) != str(part.start):
                props = part_properties(file_id, part.index, part.start)
                commands.append(Update(old.id, part.text, props))
                records[old.id] = old
        commands += _ingests(added)
        extra = [r for n, r in sorted(held.items()) if n >= len(f.parts)]
        # Parts the file no longer has go first, each on its own (a retirement takes along
        # whatever is attached to the records its command locks): a run stopped after
        # them reads the file again and finishes it.
        await self._retire(f.meta.path, extra)
        return await self._run(Together(tuple(commands)), records)

    @property
    def _where(self) -> tuple[str, str]:
        return (self.source_type, self.lane)

    def _new_part(self, file_id: str, part: Part) -> NewRecord:
        props = part_properties(file_id, part.index, part.start)
        return NewRecord(part.text, props, *self._where)

    async def _retire(self, path: str, gone: Sequence[Record]) -> None:
        """Retire records (and, with each, its typed edges), one command each."""
        if not gone:
            return
        if not self.kinds.retirement:
            self.report.pending.append(
                f"{len(gone)} records of {path}: this engine cannot retire records yet"
            )
            return
        self.report.retired += len(gone)
        self.retired_ids.update(r.id for r in gone)
        for record in gone:
            command = self.kinds.retire_record(record.id, f"intake: {path} no longer holds it")
            if not self.dry_run:
                await self.execute(command)

    async def _retire_file(self, known: Described) -> None:
        """A removed file: its parts, then its record (so a run stopped between them
        finds the file removed again and finishes)."""
        held = await parts_of(self.db, self.lane, known.file_id)
        await self._retire(known.meta.path, [*held.values(), known.record])

    async def _run(self, command: Together, records: dict[str, Record]) -> Written:
        """Write `command` (dry: only decide it, as the executor would)."""
        if not self.dry_run:
            written: Written = await self.execute(command)
            return written
        txn = Txn(self.agent, self.policy, datetime.now(UTC))
        plan = command.decide(txn, Current(records=records, first_writes={}, heads={}))
        return Written(sum(w.kind == RECORD_KIND for w in plan.writes), [])


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
