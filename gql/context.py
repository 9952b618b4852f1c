"""Per-request context: who is calling, what they may read, and batched loaders."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from strawberry.dataloader import DataLoader

from gql.errors import UnauthenticatedError
from gql.feed_hub import FeedHub
from policies.model import AgentProfile, Policy
from policies.properties import Property
from store import policy_store, queries
from store.command import Command
from store.errors import NoPolicyError
from store.executor import Executor
from store.policy_store import PolicyCache, PolicyVersion
from store.pool import Pool
from store.records import Record, Version

R = TypeVar("R")


@dataclass(frozen=True)
class Services:
    """What the app's lifespan builds once and every request shares."""

    engine: AsyncEngine
    pool: Pool
    executor: Executor
    policies: PolicyCache
    # The live audit feed's fan-out; None where no app lifespan runs one.
    feed: FeedHub | None = None


@dataclass(frozen=True)
class Caller:
    """The authenticated agent name, or why there is none."""

    agent: str | None
    problem: str | None = None


@dataclass
class Context:
    """Built for each request by the GraphQL view; resolvers reach everything through it."""

    services: Services
    caller: Caller
    # Set by strawberry from a WebSocket's connection_init payload.
    connection_params: dict[str, object] | None = None
    _policy: PolicyVersion | None = None
    _record_loaders: dict[datetime | None, DataLoader[str, Record | None]] = field(
        default_factory=dict
    )
    _versions: DataLoader[str, list[Version]] | None = None
    _counts: dict[datetime | None, DataLoader[Property, int]] = field(default_factory=dict)

    @property
    def engine(self) -> AsyncEngine:
        return self.services.engine

    async def execute(self, command: Command[R]) -> R:
        """Run a write command as the caller (refused when unauthenticated)."""
        return await self.services.executor.execute(self.agent_name(), command)

    def begin_operation(self) -> None:
        """Forget what the last operation learned: a WebSocket's one context serves many
        operations, and each must be decided under the policy in force when it runs."""
        self._policy = None
        self._record_loaders = {}
        self._versions = None
        self._counts = {}

    def agent_name(self) -> str:
        """The caller's agent name; refuses an unauthenticated call."""
        if self.caller.agent is None:
            raise UnauthenticatedError(self.caller.problem or "authentication required")
        return self.caller.agent

    async def policy(self) -> PolicyVersion:
        if self._policy is None:
            self._policy = await policy_store.current(self.services.pool, self.services.policies)
            if self._policy is None:
                raise NoPolicyError()
        return self._policy

    async def agent(self) -> tuple[Policy, AgentProfile]:
        """The policy in force and the caller's profile in it."""
        name = self.agent_name()
        version = await self.policy()
        return version.policy, version.policy.agent(name)

    async def readable_lanes(self) -> list[str]:
        policy, agent = await self.agent()
        return agent.readable_lanes(policy)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[tuple[AsyncConnection, list[str]]]:
        """A connection for one read, with the lanes the caller may read."""
        lanes = await self.readable_lanes()
        async with self.engine.connect() as conn:
            yield conn, lanes

    # -- batched loads ----------------------------------------------------------

    async def records(self, ids: Sequence[str], as_of: datetime | None) -> dict[str, Record]:
        loader = self._record_loaders.get(as_of)
        if loader is None:
            loader = DataLoader(load_fn=lambda keys: self._load_records(keys, as_of))
            self._record_loaders[as_of] = loader
        loaded = await loader.load_many(list(ids))
        return {r.id: r for r in loaded if r is not None}

    async def _load_records(
        self, ids: Sequence[str], as_of: datetime | None
    ) -> list[Record | None]:
        async with self.read() as (conn, lanes):
            found = await queries.records_by_id(conn, ids, lanes, as_of)
        return [found.get(i) for i in ids]

    async def versions(self, record_id: str) -> list[Version]:
        """A record's ledger entries; the caller must already have been shown the record."""
        if self._versions is None:
            self._versions = DataLoader(load_fn=self._load_versions)
        return await self._versions.load(record_id)

    async def _load_versions(self, ids: Sequence[str]) -> list[list[Version]]:
        async with self.read() as (conn, lanes):
            readable = await queries.records_by_id(conn, ids, lanes)
            found = await queries.versions_of(conn, [i for i in ids if i in readable])
        return [found.get(i, []) for i in ids]

    async def member_count(self, prop: Property, as_of: datetime | None) -> int:
        loader = self._counts.get(as_of)
        if loader is None:
            loader = DataLoader(load_fn=lambda keys: self._load_counts(keys, as_of))
            self._counts[as_of] = loader
        return await loader.load(prop)

    async def _load_counts(self, props: Sequence[Property], as_of: datetime | None) -> list[int]:
        async with self.read() as (conn, lanes):
            counts = await queries.member_counts(conn, props, lanes, as_of)
        return [counts.get(p, 0) for p in props]
