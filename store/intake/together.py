"""Several commands decided and written as one: one transaction, one guard each.

Intake writes a file's record and its parts together, so that a run stopped at any
point leaves each file written whole or not at all. Each command keeps its own locks
and decision (the guard included); this only joins them, through the one executor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from store.ids import RECORD_KIND
from store.ledger.command import Applied, Command, Current, Locks, Plan, Txn


def joined_locks(locks: Sequence[Locks]) -> Locks:
    """Every lock any of `locks` takes."""
    merged: dict[str, Any] = {}
    for f in fields(Locks):
        found = [getattr(lock, f.name) for lock in locks]
        if isinstance(getattr(Locks(), f.name), bool):
            merged[f.name] = any(found)
        else:
            merged[f.name] = tuple(dict.fromkeys(x for one in found for x in one))
    return Locks(**merged)


@dataclass(frozen=True)
class Written:
    """What a `Together` wrote: how many new versions of records, and each result."""

    count: int
    results: list[Any]


@dataclass(frozen=True)
class Together:
    """Run `commands` in one transaction: all are written, or none. Each record is
    written by one of them only."""

    commands: tuple[Command[Any], ...]

    def locks(self) -> Locks:
        return joined_locks([c.locks() for c in self.commands])

    def decide(self, txn: Txn, current: Current) -> Plan[Written]:
        plans = [c.decide(txn, current) for c in self.commands]
        writes = [w for plan in plans for w in plan.writes]
        count = sum(w.kind == RECORD_KIND for w in writes)

        def result(applied: Applied) -> Written:
            # Each command's result sees its own entries (they come in plan order).
            results, at = [], 0
            for plan in plans:
                mine = applied.entries[at : at + len(plan.writes)]
                at += len(plan.writes)
                results.append(plan.result(Applied(entries=mine, records=applied.records)))
            return Written(count, results)

        return Plan(
            writes,
            result,
            tuple(hook for plan in plans for hook in plan.after_commit),
        )
