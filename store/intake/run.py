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
from store.intake.detect import Edge, Ref
from store.intake.edge_pass import EdgePass, detect
from store.intake.fresh import Fresh, fresh, same_stat
from store.intake.parts import Part
from store.intake.records import (
    LABELS,
    OFFSET,
    READING,
    Described,
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
    part_metadata,
    part_properties,
    summary_of,
)
from store.intake.report import IntakeReport, Refused, refusal
from store.intake.seams import KINDS, Kinds
from store.intake.sources import Source
from store.intake.state import FolderState, folder_state, parts_of
from store.intake.together import RETIRED, Together, Written
from store.intake.walk import Found, Skipped, Text
from store.kinds.policy.in_force import PolicyVersion
from store.kinds.record.commands import Ingest, NewRecord, RemoveProperties, Update
from store.kinds.record.locks import RecordsRead
from store.kinds.record.model import Record
from store.ledger.command import Command, Current, Txn
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
    edges: EdgePass = field(init=False)
    # Files read whose content is that of their record, though their time moved on.
    _stale: dict[str, Found] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.report = IntakeReport(self.lane, self.folder, self.dry_run)
        self.source_type = source_type_for(self.policy.policy, self.lane)
        self.edges = EdgePass(
            self.kinds,
            self.db,
            self.lane,
            self.dry_run,
            self.report,
            self.execute,
            self.retired_ids,
            self._parts_of,
        )

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
            await self.edges.prepare(detected, state, kept, read, moves, gone, removed)
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
                self.edges.written(path, outcome)
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
            upserted, retired, moved = self.edges.counts.get(path, (0, 0, 0))
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
            await self.edges.write(detected, read)
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
            if known is not None and known.reading == READING and same_stat(known.meta, found):
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
            then, ahead = await self.edges.step(path, {})
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
        then, ahead = await self.edges.step(path, mine)
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
        plan = command.decide(txn, Current(rows=RecordsRead(records=records)))
        ours = [w for w in plan.writes if w.kind == RECORD_KIND]
        return Written(len(ours), [], sum(w.event == RETIRED for w in ours))


def _ingests(inputs: Sequence[NewRecord]) -> tuple[Command[Any], ...]:
    return tuple(Ingest(tuple(inputs[n : n + MAX_BATCH])) for n in range(0, len(inputs), MAX_BATCH))
