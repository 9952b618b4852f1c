"""Running a coroutine in the caller's own step, with a task only if it has to wait.

Python 3.12 calls this an eager task; the gateway runs on 3.11 too. The feed's hub
sends one event to hundreds of sockets: a send to a socket that does not push back
never waits, so it is run right there, and only one that waits costs a task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any


def run_eagerly(coroutine: Coroutine[Any, Any, None]) -> asyncio.Future[None] | None:
    """Run `coroutine` now, in the caller's step: None if it finished without waiting,
    else a task that runs the rest of it."""
    try:
        first = coroutine.send(None)
    except StopIteration:
        return None
    except BaseException:
        coroutine.close()
        raise
    rest = asyncio.ensure_future(_Rest(coroutine, first))
    # Cancelled before its first step, the task never resumes the coroutine: close it,
    # so that its cleanup runs now (a no-op once it has finished).
    rest.add_done_callback(lambda _: coroutine.close())
    return rest


class _Rest:
    """The rest of a coroutine `run_eagerly` started: resumed by a task as it would
    have been had the task run it from the start."""

    def __init__(self, coroutine: Coroutine[Any, Any, None], first: object) -> None:
        self._coroutine = coroutine
        self._first = first

    def __await__(self) -> Generator[Any, None, None]:
        waiting_on = self._first
        while True:
            try:
                yield waiting_on
            except BaseException as exc:  # the task's cancellation, passed on
                try:
                    waiting_on = self._coroutine.throw(exc)
                except StopIteration:
                    return
                continue
            try:
                waiting_on = self._coroutine.send(None)
            except StopIteration:
                return
