"""The engine an intake runs on in process, as the CLI builds it: no HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from store.kinds.policy import in_force as policy_store
from store.kinds.policy.in_force import PolicyCache, PolicyVersion
from store.ledger.executor import Executor
from store.operations.roles import runtime_url
from store.pool import create_pool
from store.reads.lane_floor import Lanes
from store.reads.snapshot import Snapshot


@dataclass(frozen=True)
class Engine:
    executor: Executor
    policy: PolicyVersion
    snapshot: Snapshot


@asynccontextmanager
async def engine(url: str) -> AsyncIterator[Engine]:
    """The executor, the policy in force and a read snapshot of the database at `url`."""
    pool = await create_pool(runtime_url(url), 4)
    cache = PolicyCache.empty()
    in_force = await policy_store.current(pool, cache)
    assert in_force is not None

    async def every_lane() -> Lanes:
        return Lanes.of(in_force.policy.lane_names())

    snapshot = Snapshot(pool, lanes=every_lane)
    try:
        yield Engine(Executor(pool, cache), in_force, snapshot)
    finally:
        await snapshot.close()
        await pool.close()
