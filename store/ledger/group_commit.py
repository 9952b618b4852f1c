"""Group commit: concurrent commands that lock no record share one transaction.

A command whose only lock is the shared policy head (a new record, a batch of new
records) reads nothing another such command writes, so any number of them can be
decided under one share lock and appended by one statement with one commit. While
a group is being written, new such commands queue; when a writer is free, the queue
becomes its next group. A command that arrives when a writer is idle waits for
nothing: it is a group of one.

Each command keeps its own decision (`decided_in_group`: on nothing read, its later
steps on what its earlier steps wrote), refusal and result. If writing a group fails
(the database refused the append, or the connection was lost), every command in it
that has no answer yet runs again on its own, so one command cannot fail another.

A caller cancelled (its request stopped, its client gone) before its command was
decided takes it out: it is never written, so "stopped" is true. Once decided, the
command is in a transaction being committed, and the caller waits for that outcome
(at most `outcome_timeout` seconds): the result if it was written, its failure if
not, `OutcomeUnknownError` if neither came in time; never "stopped".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from store.errors import OutcomeUnknownError, StoppedError
from store.ledger.append import build_rows
from store.ledger.command import Applied, Command, Current, Locks, Plan, Txn
from store.ledger.locks import StepError, late, row_locks
from store.ledger.registry import Rows
from store.reads.lane_floor import Floor

# Commands in one group, and the new versions one group may write: a group stays one
# modest transaction however many callers queue.
MAX_GROUP = 64
MAX_GROUP_WRITES = 2_000
# How long a cancelled caller whose command is being committed waits for the outcome.
DEFAULT_OUTCOME_TIMEOUT = 5.0
# A command that locks nothing but the shared policy head reads nothing either; such
# commands are written in groups.
NOTHING_LOCKED = Locks()


@dataclass(eq=False)
class Waiting:
    """A command in the queue, and where its caller waits for the answer.

    `decided`: its writes are in the transaction of a group being written, so its
    caller can no longer take it out. A caller that took it out cancels `answer`.
    """

    agent: str
    command: Command[Any]
    answer: asyncio.Future[Any]
    # The lanes its caller may read and write (store.reads.lane_floor).
    floor: Floor | None = None
    decided: bool = False

    @property
    def withdrawn(self) -> bool:
        return self.answer.cancelled()

    def succeed(self, result: Any) -> None:
        if not self.answer.done():  # the caller may have gone (cancelled)
            self.answer.set_result(result)

    def fail(self, exc: BaseException) -> None:
        if not self.answer.done():
            self.answer.set_exception(exc)


# Writes a group in one transaction and answers its commands; returns the commands
# it left for the next group (when the group reached MAX_GROUP_WRITES).
WriteGroup = Callable[[Sequence[Waiting]], Awaitable[Sequence[Waiting]]]
RunAlone = Callable[[str, Command[Any], "Floor | None"], Awaitable[Any]]


class GroupCommit:
    """The queue of joinable commands and the writers that drain it."""

    def __init__(
        self,
        write_group: WriteGroup,
        run_alone: RunAlone,
        writers: int = 2,
        outcome_timeout: float = DEFAULT_OUTCOME_TIMEOUT,
    ) -> None:
        self._write_group = write_group
        self._run_alone = run_alone
        self._outcome_timeout = outcome_timeout
        # Two writers: one decides and encodes a group while the other waits on the
        # database, so neither the process nor the connection idles.
        self._writers = writers
        self._busy = 0
        self._queue: list[Waiting] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, agent: str, command: Command[Any], floor: Floor | None = None) -> Any:
        waiting = Waiting(agent, command, asyncio.get_running_loop().create_future(), floor)
        self._queue.append(waiting)
        if self._busy < self._writers:
            self._busy += 1
            task = asyncio.create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            # Shielded: the caller's cancellation must not cancel the answer a writer sets.
            return await asyncio.shield(waiting.answer)
        except asyncio.CancelledError:
            if not waiting.decided:
                # Not decided yet: taken out (from the queue, or from the group a
                # writer holds, which skips it), so it is never written.
                waiting.answer.cancel()
                with contextlib.suppress(ValueError):
                    self._queue.remove(waiting)
                raise
        return await self._outcome(waiting)

    async def _outcome(self, waiting: Waiting) -> Any:
        """The answer of a command being committed whose caller was cancelled meanwhile."""
        done, _ = await asyncio.wait({waiting.answer}, timeout=self._outcome_timeout)
        if not done:
            waiting.answer.add_done_callback(_retrieved)  # nobody reads it now
            raise OutcomeUnknownError(self._outcome_timeout)
        return waiting.answer.result()

    async def _drain(self) -> None:
        group: Sequence[Waiting] = ()
        try:
            while self._queue:
                group, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
                group = [w for w in group if not w.withdrawn]
                if not group:
                    continue
                try:
                    left = await self._write_group(group)
                except Exception:
                    await asyncio.gather(*(self._alone(w) for w in group if not w.answer.done()))
                    left = ()
                self._queue[:0] = left
                group = ()
        except BaseException as exc:
            # Cancelled (the gateway stops): no caller waits for an answer forever. One
            # decided may have been committed: its caller is told so, never "stopped".
            for waiting in [*group, *self._queue]:
                if waiting.decided:
                    waiting.fail(OutcomeUnknownError(0))
                else:
                    waiting.fail(exc if isinstance(exc, Exception) else StoppedError())
            self._queue = []
            raise
        finally:
            self._busy -= 1

    async def _alone(self, waiting: Waiting) -> None:
        try:
            waiting.succeed(await self._run_alone(waiting.agent, waiting.command, waiting.floor))
        except Exception as exc:
            waiting.fail(exc)


def _retrieved(answer: asyncio.Future[Any]) -> None:
    """Marks a late answer's failure as seen, so asyncio does not log it as lost."""
    if not answer.cancelled():
        answer.exception()


@dataclass(frozen=True)
class Decided:
    """A command of a group as decided, every step of it: the rows it appends, its
    last step's plan and what that applied, and every step's hooks."""

    rows: Rows
    plan: Plan[Any]
    applied: Applied[Any]
    hooks: tuple[Callable[[], None], ...]


def decided_in_group(txn: Txn, command: Command[Any]) -> Decided:
    """A command that locks nothing, decided on nothing read; each later step of it on
    what its earlier steps wrote, as they wrote it (nothing else may a later step
    name: its first step locked nothing)."""
    plan = command.decide(txn, Current(rows=row_locks().written({})))
    rows, entries, written = build_rows(txn, plan.writes, {})
    made = dict(written)
    objects = {w.object_id for w in plan.writes}
    kinds_written = {w.kind for w in plan.writes}
    applied = Applied(entries=entries, records=written)
    hooks = list(plan.after_commit)
    while plan.then is not None:
        following = plan.then(applied)
        if following is None:
            break
        plan = following.decide(txn, _on_written(following.locks(), made, objects, kinds_written))
        if any(w.object_id in objects for w in plan.writes):
            raise StepError(
                "a later step of a command written in a group writes an object an earlier "
                "step wrote: one append holds one version of each object"
            )
        more, entries, written = build_rows(txn, plan.writes, made)
        rows.extend(more)
        made |= written
        objects |= {w.object_id for w in plan.writes}
        kinds_written |= {w.kind for w in plan.writes}
        applied = Applied(entries=entries, records=written)
        hooks += plan.after_commit
    return Decided(rows, plan, applied, tuple(hooks))


def _on_written(
    locks: Locks, made: Mapping[str, Any], objects: Collection[str], kinds_written: set[str]
) -> Current[Any]:
    """What a later step of a group's command decides on: the records its earlier steps
    made. A key it names holds one of their ids, and no object of the key's kind was
    written yet, so nothing holds it."""
    rows_kind = row_locks()
    named = () if locks.rows is None else rows_kind.named_only(locks)
    if named is None or replace(locks, rows=None, keys=()) != NOTHING_LOCKED:
        raise late("more than the records its earlier steps wrote and their keys")
    for ident in named:
        if ident not in made:
            raise late(f"record '{ident}'")
    for kind_name, key, values in locks.keys:
        if kind_name in kinds_written or not any(v in objects for v in values):
            raise late(f"the {kind_name} key {key} of {list(values)}")
    return Current(rows=rows_kind.written({i: made[i] for i in named}))
