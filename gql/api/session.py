"""One caller's session: who is calling, the policy in force, one read snapshot, writes.

It holds no transport or GraphQL types, so that every transport (HTTP, the compiled path,
WebSocket, MCP) reads and writes through the same object; strawberry's `Context` wraps it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from policies.errors import UnknownAgentError
from policies.model import AgentProfile, Policy
from store.errors import NoPolicyError, ResponseTooLargeError
from store.kinds.policy import in_force as policy_store
from store.kinds.policy.in_force import PolicyCache, PolicyVersion
from store.kinds.record import queries
from store.kinds.record.search.arguments import VectorScope
from store.kinds.record.vectors import UNCHECKED as VECTORS_UNCHECKED
from store.ledger.command import Command
from store.ledger.executor import Executor
from store.pool import Pool
from store.reads.lane_floor import Lanes
from store.reads.replicas import Freshness, Replicas
from store.reads.snapshot import Reader, Snapshot

if TYPE_CHECKING:
    # The hub speaks to sockets; a session only hands it on.
    from gql.feed.hub import FeedHub

R = TypeVar("R")


class UnauthenticatedError(Exception):
    """The call carries no valid bearer token."""

    code = "UNAUTHENTICATED"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def extensions(self) -> dict[str, object]:
        return {}


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
    # Where reads run (the primary's pool and the standbys); None: `pool` alone.
    replicas: Replicas | None = None
    # Why this gateway cannot search by vector (None: it can), found once at start.
    vectors_off: str | None = VECTORS_UNCHECKED


def vector_scope(services: Services, policy: Policy) -> VectorScope:
    """What a search by vector may use under `policy` (the lanes' declared embeddings)."""
    embeddings = {n: lane.embedding for n, lane in policy.lanes.items() if lane.embedding}
    return VectorScope(embeddings, services.vectors_off)


async def policy_in_force(services: Services) -> PolicyVersion | None:
    """The policy in force for reads; when the cached head is stale, one request reads
    it while the others wait for that read instead of all reading it at once."""
    fresh = services.policies.fresh()
    if fresh is not None:
        return fresh
    async with services.policy_read:
        return await policy_store.current(services.pool, services.policies)


@dataclass(frozen=True, slots=True)
class Caller:
    """The authorised agent name, or why there is none (`problem`, with `details` for
    the refusal's extensions)."""

    agent: str | None
    problem: str | None = None
    details: dict[str, object] | None = None


@dataclass(slots=True)
class Session:
    """One operation's view of the memory as one caller: the policy is read once, reads
    share one snapshot opened at the first statement, and the content they read is
    counted against one response budget."""

    services: Services
    caller: Caller
    # A policy fixed for the session's whole life (the feed renders its events under
    # the rights a subscriber group was decided with); None reads the one in force.
    pinned: PolicyVersion | None = None
    # What its reads must see (the LSN the client sent, the newest it wrote); shared
    # by the fresh sessions of one request, so its answer carries the LSN it wrote.
    freshness: Freshness = field(default_factory=Freshness)
    _policy: PolicyVersion | None = None
    _snapshot: Snapshot | None = None
    _budget: queries.ContentBudget | None = None

    def fresh(self) -> Session:
        """A new session for the same caller, sharing nothing else but its freshness."""
        return Session(self.services, self.caller, self.pinned, self.freshness)

    @property
    def engine(self) -> AsyncEngine:
        return self.services.engine

    def agent_name(self) -> str:
        """The caller's agent name; refuses an unauthenticated call."""
        if self.caller.agent is None:
            raise UnauthenticatedError(self.caller.problem or "authentication required")
        return self.caller.agent

    async def policy(self) -> PolicyVersion:
        """The policy this session decides under; refuses when none is in force."""
        version = self.pinned or self._policy
        if version is None:
            version = self._policy = await policy_in_force(self.services)
            if version is None:
                raise NoPolicyError()
        return version

    async def agent(self) -> tuple[Policy, AgentProfile]:
        """The policy in force and the caller's profile in it."""
        name = self.agent_name()
        version = await self.policy()
        return version.policy, version.policy.agent(name)

    async def readable_lanes(self) -> list[str]:
        policy, agent = await self.agent()
        return agent.readable_lanes(policy)

    async def _read_floor(self) -> Lanes:
        """The lanes PostgreSQL lets this caller's snapshot read."""
        return Lanes.of(await self.readable_lanes())

    async def write_floor(self) -> Lanes:
        """The lanes PostgreSQL lets this caller's writes read and write: a write reads
        every lane the policy declares, since the guard must see what it refuses (a
        change to a group with a member the caller cannot read), and writes the caller's.
        With no policy in force, or none naming the caller, none: the command is
        refused, or applies the first policy (which writes no lane's rows)."""
        try:
            policy, agent = await self.agent()
        except (NoPolicyError, UnknownAgentError):
            return Lanes.of(())
        return Lanes.of(policy.lane_names(), agent.writable_lanes(policy))

    async def execute(self, command: Command[R]) -> R:
        """Run a write command as the caller (refused when unauthenticated)."""
        agent = self.agent_name()
        floor = await self.write_floor()
        written = await self.services.executor.run(agent, command, floor)
        self.freshness.wrote(written.lsn)
        return written.result

    @property
    def snapshot(self) -> Snapshot:
        """The session's one read snapshot, opened at its first statement."""
        if self._snapshot is None:
            source = self.services.replicas or self.services.pool
            self._snapshot = Snapshot(source, self.freshness, self._read_floor)
        return self._snapshot

    @asynccontextmanager
    async def read(self) -> AsyncIterator[tuple[Reader, list[str]]]:
        """The session's snapshot, with the lanes the caller may read."""
        lanes = await self.readable_lanes()
        yield self.snapshot, lanes

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

    def forget_policy(self) -> None:
        """Read the policy in force again at the next decision."""
        self._policy = None

    def new_response(self) -> None:
        """Each response (each event of a subscription) has a budget of its own."""
        self._budget = None

    async def end_reads(self) -> None:
        """End the snapshot; a later read (the next subscription event) starts a new one."""
        snapshot, self._snapshot = self._snapshot, None
        self._budget = None
        if snapshot is not None:
            await snapshot.close()
