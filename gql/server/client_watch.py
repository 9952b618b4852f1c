"""Stopping a request's work when its client leaves or its time is up."""

from __future__ import annotations

import asyncio
import warnings

from starlette.types import Receive

# A request stopped midway (its client left, or its time ran out) leaves graphql-core
# and strawberry with resolver coroutines made but never started; Python warns about
# each as it is freed. They are expected there, and only there.
ABANDONED_RESOLVERS = r"coroutine '(Executor|GraphQLCoreConverter)\..*' was never awaited"
warnings.filterwarnings("ignore", ABANDONED_RESOLVERS, RuntimeWarning)


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


# Most answers take a few milliseconds: watching for the client to leave, and the
# request's deadline, start only after this long, so that a quick answer costs one
# timer and no second task.
WATCH_AFTER_SECONDS = 0.05


class ClientWatch:
    """Cancels the request's own task when its client leaves (`left`) or its time is up
    (`expired`); that cancellation ends at this block, which it `stopped` unless the work
    took it to answer a write's outcome. Both start after WATCH_AFTER_SECONDS, from one
    timer."""

    def __init__(self, receive: Receive, timeout: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._receive = receive
        self._first = min(WATCH_AFTER_SECONDS, timeout)
        self._rest = timeout - self._first
        self._watcher: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.left = False
        self.expired = False
        self.stopped = False

    def __enter__(self) -> ClientWatch:
        self._timer = asyncio.get_running_loop().call_later(self._first, self._watch)
        return self

    def _watch(self) -> None:
        self._watcher = asyncio.ensure_future(_disconnected(self._receive))
        self._watcher.add_done_callback(self._gone)
        self._timer = asyncio.get_running_loop().call_later(self._rest, self._expire)

    def _gone(self, watcher: asyncio.Future[None]) -> None:
        if not watcher.cancelled() and watcher.exception() is None and not self.expired:
            self.left = True
            self._task.cancel()

    def _expire(self) -> None:
        if not self.left:
            self.expired = True
            self._task.cancel()

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        assert self._timer is not None
        self._timer.cancel()
        if self._watcher is not None:
            self._watcher.remove_done_callback(self._gone)
            self._watcher.cancel()
        if not (self.left or self.expired):
            return False
        self._task.uncancel()  # our own cancellation: it ends here
        self.stopped = kind is asyncio.CancelledError
        return self.stopped
