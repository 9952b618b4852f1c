"""`run_eagerly`: the hub's sends run in its own step, and only a send that waits gets a task."""

from __future__ import annotations

import asyncio

import pytest

from gql.feed.eager import run_eagerly


async def test_a_coroutine_that_never_waits_is_finished_at_once() -> None:
    done: list[str] = []

    async def send() -> None:
        done.append("sent")

    assert run_eagerly(send()) is None
    assert done == ["sent"]


async def test_one_that_waits_goes_on_in_a_task_with_what_it_awaited() -> None:
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    steps: list[str] = []

    async def send() -> None:
        steps.append("before")
        steps.append(await gate)
        await asyncio.sleep(0)  # a bare yield, as asyncio.sleep(0) makes
        steps.append("after")

    rest = run_eagerly(send())
    assert rest is not None
    assert steps == ["before"]
    await asyncio.sleep(0.01)
    assert not rest.done()
    gate.set_result("opened")
    await asyncio.wait_for(rest, 1)
    assert steps == ["before", "opened", "after"]


async def test_cancelling_the_rest_cancels_the_coroutine() -> None:
    cleaned: list[str] = []

    async def send() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append("cleaned")

    rest = run_eagerly(send())
    assert rest is not None
    rest.cancel()
    with pytest.raises(asyncio.CancelledError):
        await rest
    assert cleaned == ["cleaned"]


async def test_a_failure_before_any_wait_is_raised_to_the_caller() -> None:
    async def send() -> None:
        raise ConnectionError("socket gone")

    with pytest.raises(ConnectionError, match="socket gone"):
        run_eagerly(send())


async def test_a_failure_after_a_wait_is_the_task_s() -> None:
    gate = asyncio.Event()

    async def send() -> None:
        await gate.wait()
        raise ConnectionError("socket gone")

    rest = run_eagerly(send())
    assert rest is not None
    gate.set()
    with pytest.raises(ConnectionError):
        await rest
