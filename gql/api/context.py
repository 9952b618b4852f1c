"""The strawberry context: a caller's `Session` and what strawberry needs beside it
(batched loaders, a WebSocket's connection_init payload)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from graphql import ExecutionResult as GraphQLResult
from graphql import GraphQLError
from sqlalchemy.ext.asyncio import AsyncEngine
from strawberry.dataloader import DataLoader
from strawberry.extensions import SchemaExtension
from strawberry.types.execution import ExecutionResult, StreamExecutionResult
from strawberry.types.graphql import OperationType

from gql.api.auth import authenticate, socket_authorization
from gql.api.errors import error_extensions
from gql.api.session import Caller, Services, Session
from gql.feed.outlet import Outlet
from policies.model import AgentProfile, Policy
from policies.properties import Property
from store.errors import ResponseTooLargeError
from store.kinds.policy.in_force import PolicyVersion
from store.kinds.record import queries
from store.kinds.record.model import Record, Version
from store.ledger.command import Command
from store.reads.replicas import Freshness
from store.reads.snapshot import Reader, Snapshot

R = TypeVar("R")


@dataclass
class SocketEnd:
    """Set by an operation that found the socket's credentials gone: once the operation
    has sent its last message, the socket is closed with `code` (its other operations
    would be refused the same way)."""

    code: int | None = None
    reason: str = ""


@dataclass
class Context:
    """Built for each request by the GraphQL view (and, over a WebSocket, copied for
    each operation by `OperationScope`); resolvers reach everything through it, and
    everything but the loaders through its session."""

    session: Session
    # Set by strawberry from a WebSocket's connection_init payload.
    connection_params: dict[str, object] | None = None
    # Set by the WebSocket handler for each operation on a socket: the outlet its results
    # may be sent through already encoded, and where it asks for the socket's close.
    outlet: Outlet | None = None
    socket_end: SocketEnd | None = None
    _record_loaders: dict[datetime | None, DataLoader[str, Record | None]] = field(
        default_factory=dict
    )
    _versions: DataLoader[str, list[Version]] | None = None
    _counts: dict[datetime | None, DataLoader[Property, int]] = field(default_factory=dict)

    @property
    def services(self) -> Services:
        return self.session.services

    @property
    def caller(self) -> Caller:
        return self.session.caller

    @caller.setter
    def caller(self, caller: Caller) -> None:
        self.session.caller = caller

    @property
    def engine(self) -> AsyncEngine:
        return self.session.engine

    async def execute(self, command: Command[R]) -> R:
        """Run a write command as the caller (refused when unauthenticated)."""
        return await self.session.execute(command)

    def for_operation(self) -> Context:
        """A fresh context for one operation, sharing only who is calling.

        A WebSocket's one connection context serves many operations, possibly at
        once: each gets its own session (policy, snapshot) and loaders, so that no
        operation resets or reads another's. A subclass keeps its own fields (the feed's
        rendering context carries the events it renders).
        """
        return dataclasses.replace(
            self, session=self.session.fresh(), _record_loaders={}, _versions=None, _counts={}
        )

    def close_socket_after_operation(self, code: int, reason: str) -> None:
        """Close the operation's socket with `code` once the operation has ended (not
        over a WebSocket: nothing to close)."""
        if self.socket_end is not None:
            self.socket_end.code, self.socket_end.reason = code, reason

    def begin_operation(self) -> None:
        """Forget what was learned so far (kept for callers that reuse one context)."""
        self.session.forget_policy()
        self._forget_reads()

    def _forget_reads(self) -> None:
        self._record_loaders = {}
        self._versions = None
        self._counts = {}
        self.session.new_response()

    @property
    def budget(self) -> queries.ContentBudget:
        """The record content this response may still read."""
        return self.session.budget

    def over_budget(self) -> ResponseTooLargeError | None:
        return self.session.over_budget()

    async def end_reads(self) -> None:
        """End the snapshot; a later read (the next subscription event) starts a new one."""
        self._forget_reads()
        await self.session.end_reads()

    def agent_name(self) -> str:
        return self.session.agent_name()

    async def policy(self) -> PolicyVersion:
        return await self.session.policy()

    async def agent(self) -> tuple[Policy, AgentProfile]:
        return await self.session.agent()

    async def readable_lanes(self) -> list[str]:
        return await self.session.readable_lanes()

    @property
    def snapshot(self) -> Snapshot:
        return self.session.snapshot

    def read(self) -> AbstractAsyncContextManager[tuple[Reader, list[str]]]:
        """The operation's snapshot, with the lanes the caller may read."""
        return self.session.read()

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
        return await self._count_loader(as_of).load(prop)

    def counted(self, prop: Property, as_of: datetime | None, members: int) -> None:
        """How many readable records carry `prop`, as a read found it: what
        `member_count` then gives without reading it again."""
        self._count_loader(as_of).prime(prop, members)

    def _count_loader(self, as_of: datetime | None) -> DataLoader[Property, int]:
        loader = self._counts.get(as_of)
        if loader is None:
            loader = DataLoader(load_fn=lambda keys: self._load_counts(keys, as_of))
            self._counts[as_of] = loader
        return loader

    async def _load_counts(self, props: Sequence[Property], as_of: datetime | None) -> list[int]:
        async with self.read() as (db, lanes):
            counts = await queries.member_counts(db, props, lanes, as_of)
        return [counts.get(p, 0) for p in props]


class OperationScope(SchemaExtension):
    """Gives each operation its own context and ends its read snapshot when it ends.

    Listed first, so every other extension and resolver sees the operation's own
    context. A subscription's snapshot ends after each event it sends, and before it
    waits for the next (`Rights.next`), so each event is read at one moment and no
    connection is held between events.
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
                extensions = error_extensions(too_large.code, too_large.extensions())
                result.data = None
                result.errors = [GraphQLError(too_large.message, extensions=extensions)]
        finally:
            await context.end_reads()

    async def on_execute(self) -> AsyncIterator[None]:
        # Parsed and validated now. A subscription's events come from the live feed, which
        # follows the primary: a standby may not have replayed them yet, so it reads there.
        context = self.execution_context.context
        with suppress(RuntimeError):  # no document: nothing runs
            subscription = self.execution_context.operation_type is OperationType.SUBSCRIPTION
            if subscription and isinstance(context, Context):
                context.session.freshness = Freshness(primary=True)
        yield

    async def on_stream_result(self, result: StreamExecutionResult) -> AsyncIterator[None]:
        # Called with each subscription event once its fields are resolved.
        context = self.execution_context.context
        if isinstance(context, Context):
            await context.end_reads()
        yield


class PerOperationAuth(SchemaExtension):
    """Starts every operation afresh; on a WebSocket, checks its token again.

    A socket's one context serves every operation for as long as it stays open, so
    each must be decided under the token and the policy as they are when it runs.
    """

    async def on_operation(self) -> AsyncIterator[None]:
        context = self.execution_context.context
        if isinstance(context, Context):
            context.begin_operation()
            raw = socket_authorization(context.connection_params)
            if raw is not None and context.caller.agent is not None:
                context.caller = await authenticate(raw, context.services, None)
        yield
