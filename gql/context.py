"""Per-operation context: who is calling, what they may read, one snapshot, batched loaders."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from graphql import ExecutionResult as GraphQLResult
from graphql import GraphQLError
from sqlalchemy.ext.asyncio import AsyncEngine
from strawberry.dataloader import DataLoader
from strawberry.extensions import SchemaExtension
from strawberry.types.execution import ExecutionResult, StreamExecutionResult

from gql.errors import UnauthenticatedError
from gql.feed_hub import FeedHub
from policies.model import AgentProfile, Policy
from policies.properties import Property
from store import policy_store, queries
from store.command import Command
from store.errors import NoPolicyError, ResponseTooLargeError
from store.executor import Executor
from store.policy_store import PolicyCache, PolicyVersion
from store.pool import Pool
from store.records import Record, Version
from store.snapshot import Reader, Snapshot

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
    policy_read: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The most bytes of record content one response may read (the compiled path:
    # of JSON it may build).
    max_response_bytes: int = queries.DEFAULT_MAX_RESPONSE_BYTES


async def policy_in_force(services: Services) -> PolicyVersion | None:
    """The policy in force for reads; when the cached head is stale, one request reads
    it while the others wait for that read instead of all reading it at once."""
    fresh = services.policies.fresh()
    if fresh is not None:
        return fresh
    async with services.policy_read:
        return await policy_store.current(services.pool, services.policies)


@dataclass(frozen=True)
class Caller:
    """The authenticated agent name, or why there is none."""

    agent: str | None
    problem: str | None = None


@dataclass
class Context:
    """Built for each request by the GraphQL view (and, over a WebSocket, copied for
    each operation by `OperationScope`); resolvers reach everything through it."""

    services: Services
    caller: Caller
    # Set by strawberry from a WebSocket's connection_init payload.
    connection_params: dict[str, object] | None = None
    _policy: PolicyVersion | None = None
    _snapshot: Snapshot | None = None
    _record_loaders: dict[datetime | None, DataLoader[str, Record | None]] = field(
        default_factory=dict
    )
    _versions: DataLoader[str, list[Version]] | None = None
    _counts: dict[datetime | None, DataLoader[Property, int]] = field(default_factory=dict)
    _budget: queries.ContentBudget | None = None

    @property
    def engine(self) -> AsyncEngine:
        return self.services.engine

    async def execute(self, command: Command[R]) -> R:
        """Run a write command as the caller (refused when unauthenticated)."""
        return await self.services.executor.execute(self.agent_name(), command)

    def for_operation(self) -> Context:
        """A fresh context for one operation, sharing only who is calling.

        A WebSocket's one connection context serves many operations, possibly at
        once: each gets its own policy, snapshot and loaders, so that no operation
        resets or reads another's. A subclass keeps its own fields (the feed's rendering
        context carries the events it renders).
        """
        return dataclasses.replace(
            self,
            _policy=None,
            _snapshot=None,
            _record_loaders={},
            _versions=None,
            _counts={},
            _budget=None,
        )

    def begin_operation(self) -> None:
        """Forget what was learned so far (kept for callers that reuse one context)."""
        self._policy = None
        self._forget_reads()

    def _forget_reads(self) -> None:
        self._record_loaders = {}
        self._versions = None
        self._counts = {}
        # Each response (each event of a subscription) has a budget of its own.
        self._budget = None

    @property
    def budget(self) -> queries.ContentBudget:
        """The record content this response may still read."""
        if self._budget is None:
            self._budget = queries.ContentBudget(self.services.max_response_bytes)
        return self._budget

    def over_budget(self) -> ResponseTooLargeError | None:
        """The refusal of this response, when its reads went over the budget."""
        budget = self._budget
        if budget is None or not budget.refused:
            return None
        return ResponseTooLargeError(budget.limit)

    async def end_reads(self) -> None:
        """End the snapshot; a later read (the next subscription event) starts a new one."""
        snapshot, self._snapshot = self._snapshot, None
        self._forget_reads()
        if snapshot is not None:
            await snapshot.close()

    def agent_name(self) -> str:
        """The caller's agent name; refuses an unauthenticated call."""
        if self.caller.agent is None:
            raise UnauthenticatedError(self.caller.problem or "authentication required")
        return self.caller.agent

    async def policy(self) -> PolicyVersion:
        if self._policy is None:
            self._policy = await policy_in_force(self.services)
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

    @property
    def snapshot(self) -> Snapshot:
        """The operation's one read snapshot, opened at its first statement."""
        if self._snapshot is None:
            self._snapshot = Snapshot(self.services.pool)
        return self._snapshot

    @asynccontextmanager
    async def read(self) -> AsyncIterator[tuple[Reader, list[str]]]:
        """The operation's snapshot, with the lanes the caller may read."""
        lanes = await self.readable_lanes()
        yield self.snapshot, lanes

    # -- batched loads ----------------------------------------------------------

    async def records(self, ids: Sequence[str], as_of: datetime | None) -> dict[str, Record]:
        loader = self._record_loaders.get(as_of)
        if loader is None:
            loader = DataLoader(load_fn=lambda keys: self._load_records(keys, as_of))
            self._record_loaders[as_of] = loader
        loaded = await loader.load_many(list(ids))
        found = {r.id: r for r in loaded if r is not None}
        # Counted for each use: the loader reads a record once however often it is shown.
        self.budget.spend(r.state.content for r in found.values())
        return found

    async def _load_records(
        self, ids: Sequence[str], as_of: datetime | None
    ) -> list[Record | None]:
        async with self.read() as (db, lanes):
            found = await queries.records_by_id(db, ids, lanes, as_of, self.budget)
        return [found.get(i) for i in ids]

    async def versions(self, record_id: str) -> list[Version]:
        """A record's ledger entries; empty when the caller may not read the record."""
        if self._versions is None:
            self._versions = DataLoader(load_fn=self._load_versions)
        found = await self._versions.load(record_id)
        self.budget.spend(v.state.content for v in found)
        return found

    async def _load_versions(self, ids: Sequence[str]) -> list[list[Version]]:
        async with self.read() as (db, lanes):
            found = await queries.versions_of(db, ids, lanes, self.budget)
        return [found.get(i, []) for i in ids]

    async def member_count(self, prop: Property, as_of: datetime | None) -> int:
        loader = self._counts.get(as_of)
        if loader is None:
            loader = DataLoader(load_fn=lambda keys: self._load_counts(keys, as_of))
            self._counts[as_of] = loader
        return await loader.load(prop)

    async def _load_counts(self, props: Sequence[Property], as_of: datetime | None) -> list[int]:
        async with self.read() as (db, lanes):
            counts = await queries.member_counts(db, props, lanes, as_of)
        return [counts.get(p, 0) for p in props]


class OperationScope(SchemaExtension):
    """Gives each operation its own context and ends its read snapshot when it ends.

    Listed first, so every other extension and resolver sees the operation's own
    context. A subscription's snapshot ends after each event it sends, so each
    event is read at one moment and no connection is held between events.
    """

    async def on_operation(self) -> AsyncIterator[None]:
        shared = self.execution_context.context
        if not isinstance(shared, Context):
            yield
            return
        context = shared.for_operation()
        self.execution_context.context = context
        try:
            yield
            too_large = context.over_budget()
            result = self.execution_context.result
            if too_large is not None and isinstance(result, GraphQLResult | ExecutionResult):
                # One refusal for the whole response, not a partial one with an error
                # at every field that read past the limit.
                extensions = {"code": too_large.code, **too_large.extensions()}
                result.data = None
                result.errors = [GraphQLError(too_large.message, extensions=extensions)]
        finally:
            await context.end_reads()

    async def on_stream_result(self, result: StreamExecutionResult) -> AsyncIterator[None]:
        # Called with each subscription event once its fields are resolved.
        context = self.execution_context.context
        if isinstance(context, Context):
            await context.end_reads()
        yield
