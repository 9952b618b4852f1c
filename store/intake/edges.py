"""Which detected edges a run writes and which it retires: the folder's edges now against
those intake wrote before, by their ends' records and detector.

Pure: given the edges detected now (ends as files and parts), the record of each end,
and the live detected edges, it says what to upsert and what to retire. A file's own
transaction carries out the plan of the edges from it (`store.intake.run`); the pass
after every file writes what is left. An edge whose
end has no record (a refused file) is left out; one whose evidence changed (the link
moved within its line or file) is upserted again, so it keeps its id and gains a
version (one whose evidence differs only by its offset has only moved, and is counted
so); one no longer detected is retired as a tombstone, never deleted.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policies.errors import PolicyError
from store.errors import StoreError
from store.intake.detect import Edge, Ref
from store.intake.report import IntakeReport, Refused, refusal
from store.intake.seams import Kinds, LiveEdge
from store.intake.together import Together
from store.ledger.command import Command


@dataclass(frozen=True)
class Upsert:
    from_id: str
    to_id: str
    edge: Edge
    moved: bool = False  # held already, its evidence the same but for its offset


@dataclass
class EdgePlan:
    upserts: list[Upsert] = field(default_factory=list)
    retires: list[LiveEdge] = field(default_factory=list)

    @property
    def moved(self) -> int:
        return sum(u.moved for u in self.upserts)


def plan_edges(
    detected: Sequence[Edge], ids: Mapping[Ref, str], live: Sequence[LiveEdge]
) -> EdgePlan:
    """What to write so that the live detected edges are exactly `detected`."""
    plan = EdgePlan()
    held = {(e.from_id, e.to_id, e.detector): e for e in live}
    wanted: set[tuple[str, str, str]] = set()
    for edge in detected:
        start, end = ids.get(edge.source), ids.get(edge.target)
        if start is None or end is None or start == end:
            continue
        key = (start, end, edge.detector.id)
        if key in wanted:
            continue
        wanted.add(key)
        found = held.get(key)
        if found is None or found.evidence != dict(edge.evidence):
            moved = found is not None and _but_offset(found.evidence) == _but_offset(edge.evidence)
            plan.upserts.append(Upsert(start, end, edge, moved))
    plan.retires = [e for key, e in sorted(held.items()) if key not in wanted]
    return plan


def _but_offset(evidence: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in evidence.items() if k != "offset"}


def edge_commands(plan: EdgePlan, kinds: Kinds) -> list[Command[Any]]:
    """The commands that carry out `plan`: its retirements, then its upserts."""
    commands = [kinds.retire_edge(gone.id) for gone in plan.retires]
    commands += [kinds.upsert_edge(new.from_id, new.to_id, new.edge) for new in plan.upserts]
    return commands


async def write_edges(
    detected: Sequence[Edge],
    ids: Mapping[Ref, str],
    live: Sequence[LiveEdge],
    retired: set[str],
    kinds: Kinds,
    write: Callable[[Together], Awaitable[object]],
    report: IntakeReport,
    dry_run: bool,
    writers: int = 8,
) -> None:
    """Upsert and retire detected edges, one transaction per file they start from.
    Edges of records retired in this run were retired with them; those the files'
    own transactions wrote are found live and left as they are."""
    kept = [e for e in live if e.from_id not in retired and e.to_id not in retired]
    plan = plan_edges(detected, ids, kept)
    path_of = {record_id: ref.path for ref, record_id in ids.items()}
    by_file: dict[str, EdgePlan] = defaultdict(EdgePlan)
    for gone in plan.retires:
        by_file[path_of.get(gone.from_id, "")].retires.append(gone)
    for new in plan.upserts:
        by_file[new.edge.source.path].upserts.append(new)
    # Side by side, as the files are: each command locks its records in the one order.
    gate = asyncio.Semaphore(writers)

    async def one(path: str) -> None:
        mine = by_file[path]
        if not dry_run:
            async with gate:
                try:
                    await write(Together(tuple(edge_commands(mine, kinds))))
                except (PolicyError, StoreError) as exc:
                    # Its file stays written; the next run detects again and writes them.
                    why = f"its edges after every file were not written: {refusal(exc)}"
                    report.refused.append(Refused(path, why))
                    return
        report.edges_written += len(mine.upserts)
        report.edges_moved += mine.moved
        report.edges_retired += len(mine.retires)

    await asyncio.gather(*(one(path) for path in sorted(by_file)))
    report.refused.sort(key=lambda r: r.path)
