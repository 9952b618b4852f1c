"""Several commands decided and written as one: one transaction, one guard each.

Intake writes each file's whole change together: its record and parts (new, updated,
retired) first, then the detected edges that start from it, which need those records
to exist. The edges are a later step of the same transaction (`Plan.then`): decided
once the records are appended, on the state they left, so a run stopped at any point
leaves each file written whole or not at all. Each command keeps its own locks and
decision (the guard included); this only joins them, through the one executor.

Every lock a later step could wait for is taken by the first (`ahead`), in the one
order of every lock; a later step locks only those again, and what the steps before it
wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

from store.errors import RetiredRecordError
from store.ids import RECORD_KIND
from store.kinds.record.locks import Records, RecordsRead, records_locked
from store.kinds.record.model import Record
from store.ledger.command import Applied, Command, Current, Locks, Plan, Txn

# A later step: the commands to decide next, from the results of every command before.
Step = Callable[[Sequence[Any]], Sequence[Command[Any]]]
RETIRED = "sr_retired"
T = TypeVar("T")


def joined_locks(locks: Sequence[Locks]) -> Locks:
    """Every lock any of `locks` takes: the ledger's, and what they ask of records."""
    ledger = _joined([replace(lock, rows=None) for lock in locks], Locks)
    records = _joined([records_locked(lock) for lock in locks], Records)
    rest = {f.name: getattr(ledger, f.name) for f in fields(Locks) if f.name != "rows"}
    return records.locks(**rest)


def _joined(asked: Sequence[T], of: type[T]) -> T:
    """Each field of `asked`, joined: any of the flags, every item of the others once."""
    merged: dict[str, Any] = {}
    for f in fields(of):  # type: ignore[arg-type]
        found = [getattr(one, f.name) for one in asked]
        if isinstance(getattr(of(), f.name), bool):
            merged[f.name] = any(found)
        elif f.name != "rows":
            merged[f.name] = tuple(dict.fromkeys(x for one in found for x in one))
    return of(**merged)


@dataclass(frozen=True)
class Written:
    """What a `Together` wrote: how many new versions of records (`retired` of them
    retirements), and each command's result, in order, step after step."""

    count: int
    results: list[Any]
    retired: int = 0


@dataclass(frozen=True)
class Together:
    """Run `commands`, then each step of `then` in order, in one transaction: all are
    written, or none. Each record is written by one command of a step only.

    `ahead`: what the later steps lock among the objects that exist before the
    transaction (the records an edge joins, the edges it retires, the keys of those
    it upserts between existing records); the first step takes it with its own."""

    commands: tuple[Command[Any], ...]
    then: tuple[Step, ...] = ()
    ahead: Locks = Locks()

    def __post_init__(self) -> None:
        _check_step(self.commands)

    def locks(self) -> Locks:
        return joined_locks([*(c.locks() for c in self.commands), self.ahead])

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Written]:
        return _decided(self.commands, txn, current, _Done(), self.then)


@dataclass(frozen=True)
class _Done:
    """What the steps before wrote."""

    results: tuple[Any, ...] = ()
    count: int = 0
    retired: int = 0


@dataclass(frozen=True)
class _Step:
    """A later step of a `Together`, as the executor runs it."""

    commands: tuple[Command[Any], ...]
    done: _Done
    then: tuple[Step, ...]

    def locks(self) -> Locks:
        return joined_locks([c.locks() for c in self.commands])

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Written]:
        return _decided(self.commands, txn, current, self.done, self.then)


def _check_step(commands: Sequence[Command[Any]]) -> None:
    if sum(bool(c.locks().attached) for c in commands) > 1:
        # Each would retire, with its records, what is attached to every record locked.
        raise ValueError("one command of a step may act on what is attached to its records")


def _refuse_retired(command: Command[Any], current: Current[RecordsRead]) -> None:
    """A command that does not act on retired records is refused one, as it would be on
    its own (a retirement beside it in the step has the executor hand them over)."""
    asked = records_locked(command.locks())
    if asked.retired:
        return
    for ident in asked.ids:
        record = current.rows.records.get(ident)
        gone = None if record is None else record.retirement
        if gone is not None:
            raise RetiredRecordError(ident, gone.at, gone.actor, gone.reason)


def _decided(
    commands: Sequence[Command[Any]],
    txn: Txn,
    current: Current[RecordsRead],
    done: _Done,
    then: tuple[Step, ...],
) -> Plan[Written]:
    plans = []
    for command in commands:
        _refuse_retired(command, current)
        plans.append(command.decide(txn, current))
    writes = [w for plan in plans for w in plan.writes]
    records = [w for w in writes if w.kind == RECORD_KIND]
    count = done.count + len(records)
    retired = done.retired + sum(w.event == RETIRED for w in records)

    def results(applied: Applied[Record]) -> tuple[Any, ...]:
        # Each command's result sees its own entries (they come in plan order).
        found, at = list(done.results), 0
        for plan in plans:
            mine = applied.entries[at : at + len(plan.writes)]
            at += len(plan.writes)
            found.append(plan.result(Applied(entries=mine, records=applied.records)))
        return tuple(found)

    def result(applied: Applied[Record]) -> Written:
        return Written(count, list(results(applied)), retired)

    def following(applied: Applied[Record]) -> _Step | None:
        now = _Done(results(applied), count, retired)
        for n, step in enumerate(then):
            commands = tuple(step(now.results))
            if commands:
                _check_step(commands)
                return _Step(commands, now, then[n + 1 :])
        return None

    return Plan(
        writes,
        result,
        tuple(hook for plan in plans for hook in plan.after_commit),
        following if then else None,
    )
