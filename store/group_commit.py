"""Group commit: concurrent commands that lock no record share one transaction.

A command whose only lock is the shared policy head (a new record, a batch of new
records) reads nothing another such command writes, so any number of them can be
decided under one share lock and appended by one statement with one commit. While
a group is being written, new such commands queue; when a writer is free, the queue
becomes its next group. A command that arrives when a writer is idle waits for
nothing: it is a group of one.

Each command keeps its own decision, refusal and result. If writing a group fails
(the database refused the append, or the connection was lost), every command in it
that has no answer yet runs again on its own, so one command cannot fail another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from store.command import Command

# Commands in one group, and the new versions one group may write: a group stays one
# modest transaction however many callers queue.
MAX_GROUP = 64
MAX_GROUP_WRITES = 2_000


@dataclass(frozen=True)
class Waiting:
    """A command in the queue, and where its caller waits for the answer."""

    agent: str
    command: Command[Any]
    answer: asyncio.Future[Any]

    def succeed(self, result: Any) -> None:
        if not self.answer.done():  # the caller may have gone (cancelled)
            self.answer.set_result(result)

    def fail(self, exc: BaseException) -> None:
        if not self.answer.done():
            self.answer.set_exception(exc)


# Writes a group in one transaction and answers its commands; returns the commands
# it left for the next group (when the group reached MAX_GROUP_WRITES).
WriteGroup = Callable[[Sequence[Waiting]], Awaitable[Sequence[Waiting]]]
RunAlone = Callable[[str, Command[Any]], Awaitable[Any]]


class GroupCommit:
    """The queue of joinable commands and the writers that drain it."""

    def __init__(self, write_group: WriteGroup, run_alone: RunAlone, writers: int = 2) -> None:
        self._write_group = write_group
        self._run_alone = run_alone
        # Two writers: one decides and encodes a group while the other waits on the
        # database, so neither the process nor the connection idles.
        self._writers = writers
        self._busy = 0
        self._queue: list[Waiting] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, agent: str, command: Command[Any]) -> Any:
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append(Waiting(agent, command, answer))
        if self._busy < self._writers:
            self._busy += 1
            task = asyncio.create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await answer

    async def _drain(self) -> None:
        group: Sequence[Waiting] = ()
        try:
            while self._queue:
                group, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
                try:
                    left = await self._write_group(group)
                except Exception:
                    await asyncio.gather(*(self._alone(w) for w in group if not w.answer.done()))
                    left = ()
                self._queue[:0] = left
                group = ()
        except BaseException as exc:
            # Cancelled (the gateway stops): no caller waits for an answer forever.
            for waiting in [*group, *self._queue]:
                waiting.fail(exc if isinstance(exc, Exception) else RuntimeError("stopped"))
            self._queue = []
            raise
        finally:
            self._busy -= 1

    async def _alone(self, waiting: Waiting) -> None:
        try:
            waiting.succeed(await self._run_alone(waiting.agent, waiting.command))
        except Exception as exc:
            waiting.fail(exc)
