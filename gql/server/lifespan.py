"""What a gateway process opens at start and closes at the end: the database, the
checkpoint key, the policy, the live feed, and the checkpoint loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from typing import Any

from starlette.applications import Starlette

from gql.api.session import Services
from gql.feed.hub import FeedHub
from gql.server.checkpoint_loop import anchor_every
from gql.server.expiry_loop import expire_every
from gql.server.frames import text_frames
from gql.server.heap import settle_heap
from gql.server.metrics import Metrics
from gql.server.policy_startup import ensure_policy, note_search_languages, note_vector_search
from gql.server.settings import Settings
from store.database import create_engine
from store.kinds.policy.in_force import PolicyCache
from store.ledger.executor import Executor
from store.operations import checkpoints
from store.operations.migrate import migrate
from store.operations.roles import serving_url
from store.pool import create_pool, unlimited
from store.reads.replicas import Replicas

Lifespan = Callable[[Starlette], AbstractAsyncContextManager[dict[str, Any]]]


def lifespan(
    settings: Settings,
    metrics: Metrics | None = None,
    also: Sequence[Callable[[], AbstractAsyncContextManager[None]]] = (),
    state: Mapping[str, object] | None = None,
) -> Lifespan:
    """The app's lifespan: it yields the `Services` every request shares, and `state`
    (what the server's connections read: gql.server.waiting), with what `also` names running
    inside it (the MCP session manager)."""

    @asynccontextmanager
    async def run(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        if settings.run_migrations:
            owner = create_engine(settings.database_url, pool_size=1)
            try:
                await migrate(owner)
            finally:
                await owner.dispose()
        url = await serving_url(settings.database_url, settings.runtime_database_url)
        engine = create_engine(url, pool_size=settings.pool_size)
        # Every request's statements run here: none may outlive the request.
        pool = await create_pool(url, settings.read_pool_size, settings.statement_timeout)
        replicas = Replicas(pool, settings.replicas, settings.read_pool_size)
        try:
            # First: a key that did not sign this memory's checkpoints stops the start here.
            signer = None
            if settings.checkpoint_key is not None:
                async with pool.acquire() as conn, unlimited(conn):
                    signer = await checkpoints.open_key(
                        conn,
                        settings.checkpoint_key,
                        settings.database_url,
                        settings.new_checkpoint_key,
                    )
            cache = PolicyCache.empty()
            executor = Executor(
                pool, cache, settings.write_outcome_timeout, report_lsn=replicas.enabled
            )
            version = await ensure_policy(executor, settings)
            await note_search_languages(pool, version)
            vectors_off = await note_vector_search(pool, version)
            # The hub writes group frames as this server encodes them (gql.server.frames).
            feed = FeedHub(url, engine, pool, cache, settings.feed, frames=text_frames)
            await feed.start()
            services = Services(
                engine=engine,
                pool=pool,
                executor=executor,
                policies=cache,
                feed=feed,
                max_response_bytes=settings.max_response_bytes,
                replicas=replicas,
                vectors_off=vectors_off,
            )
            # The standbys serve reads once a check finds them up and close enough.
            await replicas.check()
            tasks = [
                asyncio.create_task(anchor_every(pool, settings.checkpoint_seconds, signer)),
                asyncio.create_task(expire_every(pool, executor, settings.expiry_seconds)),
            ]
            if replicas.enabled:
                tasks.append(asyncio.create_task(replicas.check_every()))
            if metrics is not None:
                tasks.append(asyncio.create_task(metrics.sample_every(services)))
            settle_heap()
            try:
                async with AsyncExitStack() as running:
                    for start in also:
                        await running.enter_async_context(start())
                    yield {"services": services, **(state or {})}
            finally:
                for task in tasks:
                    task.cancel()
                    with suppress(asyncio.CancelledError):
                        await task
                await feed.stop()
                await executor.upkeep.finish()
        finally:
            await replicas.close()
            await pool.close()
            await engine.dispose()

    return run
