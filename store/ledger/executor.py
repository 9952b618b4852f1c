"""The one way anything is written: every command runs through `Executor.execute`.

1. begin; share-lock the policy head (exclusively for a policy change) and lock
   every record the command names, in sorted id order, in one statement (as the
   record kind locks them: `Kind.row_locks`); then the unique keys it names, then
   every other object it names or finds holding a key, each round sorted: one order
   for every command (`store.ledger.locks`);
2. let the command decide, purely, on the current state under the policy in force
   (its guard decision included);
3. append the ledger entries, move the projections and append the audit events in
   one statement; a decision that changes nothing writes nothing;
4. if the plan names a next step (`Plan.then`), lock, read and decide it in the same
   transaction, where it sees what the steps before it wrote, and append its writes;
   and so on. A later step may lock only what the first step locked or what the
   transaction wrote (`StepError` otherwise): every lock it could wait for was taken
   by the first step, in the one order, so steps add no deadlock.

Commands that lock nothing but the shared policy head (new records) take the same
steps together, many to a transaction, when they arrive at once
(`store.ledger.group_commit`); such a command's later steps may name only what its
earlier steps wrote, and decide on it as written.

A caller cancelled before its COMMIT is sent has written nothing: its transaction
rolls back. Once COMMIT is sent the caller gets what happened: the result once it
commits (the cancellation ends there), its failure, or `OutcomeUnknownError` when
the outcome does not come within `outcome_timeout` seconds; never "stopped". A task
already being cancelled begins no new write (`StoppedError`).

Each transaction begins with the lanes PostgreSQL lets it read and write
(`store.reads.lane_floor`), in the same round trip as its BEGIN: the caller's (`run`'s
`floor`; by default the agent's under the policy in force), for a group the union of its
callers' (each command was decided by the guard for its own caller).

After the commit, each kind does what follows it (`Kind.fold`: the record kind folds
its count deltas once this process's writes come to a fold), off the transaction.

With `report_lsn`, `run` also answers the WAL position the write committed at or before
(read on its connection right after COMMIT), for read replicas (`store.reads.replicas`):
a standby that has replayed it sees the write.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import operator
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Sequence,
)
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

import asyncpg

from policies.errors import UnknownAgentError
from store.errors import (
    NoPolicyError,
    OutcomeUnknownError,
    StoppedError,
    refusal_for,
)
from store.ledger import registry
from store.ledger.append import append, build_rows
from store.ledger.command import (
    Applied,
    Command,
    Current,
    Locks,
    Plan,
    Txn,
)
from store.ledger.group_commit import (
    DEFAULT_OUTCOME_TIMEOUT,
    MAX_GROUP_WRITES,
    NOTHING_LOCKED,
    Decided,
    GroupCommit,
    Waiting,
    decided_in_group,
)
from store.ledger.locks import (
    LOCK_HEAD_EXCLUSIVE,
    LOCK_HEAD_SHARED,
    Held,
    MovedError,
    attached,
    key_holders,
    lock_objects,
    read_heads,
    read_history,
    resolved_keys,
    row_locks,
)
from store.ledger.registry import Rows
from store.ledger.row_locks import Policies
from store.ledger.upkeep import ANALYZE_AFTER_ROWS, Upkeep
from store.pool import Conn, Pool
from store.reads import lane_floor
from store.reads.lane_floor import CROSSING, Crossing, Floor, Lanes
from store.reads.replicas import Lsn, commit_lsn

R = TypeVar("R")

# The writes that returned on behalf of the running request: whoever runs a request sets
# a fresh list, so that a request stopped after some of its writes can say so.
COMPLETED_WRITES: ContextVar[list[str] | None] = ContextVar("completed_writes", default=None)

# A retry after losing an idempotency race or a policy change sees the winner's state.
_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Written(Generic[R]):
    """A command's result, and the LSN its transaction committed at or before (None
    when the executor does not report LSNs, or the command wrote nothing)."""

    result: R
    lsn: Lsn | None = None


class Executor:
    """Runs write commands, one transaction each, on the gateway's pool."""

    def __init__(
        self,
        pool: Pool,
        policies: Policies,
        outcome_timeout: float = DEFAULT_OUTCOME_TIMEOUT,
        report_lsn: bool = False,
        analyze_after: int = ANALYZE_AFTER_ROWS,
    ) -> None:
        self.pool = pool
        self.upkeep = Upkeep(pool, analyze_after)
        self.policies = policies
        self.report_lsn = report_lsn
        # How far this process's writes have come towards each kind's fold (due at 1).
        self._unfolded: dict[str, float] = {}
        self._outcome_timeout = outcome_timeout
        self._groups = GroupCommit(self._write_group, self._alone, outcome_timeout=outcome_timeout)

    async def execute(self, agent: str, command: Command[R], floor: Floor | None = None) -> R:
        return (await self.run(agent, command, floor)).result

    async def run(self, agent: str, command: Command[R], floor: Floor | None = None) -> Written[R]:
        """`command`'s result, with its commit's LSN when the executor reports LSNs."""
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # Its request is being stopped, and an earlier write of it took the
            # cancellation to answer its own outcome: this one does not begin.
            raise StoppedError()
        result: Written[R]
        if command.locks() == NOTHING_LOCKED:
            result = await self._groups.submit(agent, command, floor)
        else:
            result = await self._alone(agent, command, floor)
        completed = COMPLETED_WRITES.get()
        if completed is not None:
            completed.append(type(command).__name__)
        return result

    async def _floor_of(self, agent: str) -> Floor:
        """`agent`'s lanes under the policy in force (as cached for reads): every lane it
        declares to read, since the guard must see what it refuses, and the agent's own to
        write; none when no policy is in force or names the agent (the command is refused,
        or applies the first policy, which writes no lane's rows)."""
        in_force = self.policies.fresh()
        if in_force is None:
            async with self.pool.acquire() as conn:
                head = await conn.fetchval("SELECT version FROM policy_head WHERE id = 1")
                if not head:
                    return Lanes.of(())
                in_force = await self.policies.version(conn, head)
            self.policies.remember(in_force)
        policy = in_force.policy
        try:
            profile = policy.agent(agent)
        except UnknownAgentError:
            return Lanes.of(())
        return Lanes.of(policy.lane_names(), profile.writable_lanes(policy))

    async def _group_floor(self, group: Sequence[Waiting]) -> Floor:
        """The lanes a group's transaction may read and write: its callers' together
        (resolved here, not as each caller submits: a lookup there would part them)."""
        floors = [w.floor or await self._floor_of(w.agent) for w in group]
        if any(isinstance(f, Crossing) for f in floors):
            return CROSSING
        lanes = [f for f in floors if isinstance(f, Lanes)]
        return functools.reduce(operator.or_, lanes, Lanes.of(()))

    async def _alone(self, agent: str, command: Command[R], floor: Floor | None) -> Written[R]:
        if floor is None:
            floor = await self._floor_of(agent)
        for attempt in range(_ATTEMPTS):
            try:
                return await self._run(agent, command, floor)
            except MovedError:
                # Another command moved what it locks meanwhile: look it up again.
                if attempt == _ATTEMPTS - 1:
                    raise
            except asyncpg.UniqueViolationError as exc:
                # Two calls raced on one unique key: the retry sees the winner's write.
                if exc.constraint_name not in row_locks().races or attempt == _ATTEMPTS - 1:
                    raise
            except asyncpg.PostgresError as exc:
                refusal = refusal_for(exc)
                if refusal is not None:
                    raise refusal from exc
                raise
        raise AssertionError("unreachable")

    async def _run(self, agent: str, command: Command[R], floor: Floor | None) -> Written[R]:
        hooks: list[Callable[[], None]] = []
        wrote = False
        async with self.pool.acquire() as conn:
            async with _transaction(conn, self._outcome_timeout, floor):
                held = Held()
                txn, plan, applied = await self._step(conn, agent, command, held, None)
                hooks += plan.after_commit
                wrote = bool(plan.writes)
                held.later = True
                while plan.then is not None:
                    following = plan.then(applied)
                    if following is None:
                        break
                    # The same transaction, time and policy: it sees what was written.
                    _, plan, applied = await self._step(conn, agent, following, held, txn)
                    hooks += plan.after_commit
                    wrote = wrote or bool(plan.writes)
            # Committed: a cancellation now stops only the LSN and the fold (the next
            # write folds), and the caller gets its result.
            lsn = None
            with contextlib.suppress(asyncio.CancelledError):
                lsn = await self._lsn(conn, wrote)
                await self._fold(conn)
        for hook in hooks:
            hook()
        return Written(plan.result(applied), lsn)

    async def _step(
        self, conn: Conn, agent: str, command: Command[R], held: Held, first: Txn | None
    ) -> tuple[Txn, Plan[R], Applied[Any]]:
        """Lock what `command` names, read it, let it decide and append its writes."""
        locks = command.locks()
        rows_kind = row_locks()
        step = await rows_kind.step(conn, agent, locks, self.policies)
        held.take_rows(step.ids)
        txn, rows = await self._lock(conn, agent, locks, sorted(step.ids), first)
        await step.check(conn, rows)
        keys = resolved_keys(locks, step.exact)
        found = await attached(conn, locks.attached, sorted(set(step.exact.values())))
        named = (*locks.objects, *found)
        # Keys before objects, each round in sorted order: an object found holding a
        # key is locked with the objects named, so no command locks an object and then
        # a key another command took before that object.
        await lock_objects(conn, (), keys, held)
        keyed = await key_holders(conn, locks, keys)
        objects = (*named, *((k[0], i) for k, i in keyed.items()))
        await lock_objects(conn, objects, (), held)
        read = await step.read(conn, txn, rows)
        heads, states = await read_heads(conn, locks.heads, objects)
        history = {}
        if locks.history:
            history = await read_history(conn, sorted(set(step.exact.values())))
        current = Current(
            rows=read,
            heads=heads,
            states=states,
            keyed=keyed,
            attached=tuple(found),
            history=history,
        )
        plan = command.decide(txn, current)
        applied: Applied[Any] = Applied(entries=(), records={})
        if plan.writes:
            before = read.by_id
            table_rows, entries, written = build_rows(txn, plan.writes, before)
            await append(conn, table_rows)
            applied = Applied(entries=entries, records=written)
            held.written.update(w.object_id for w in plan.writes)
            self._wrote(table_rows)
            if plan.rewrite is not None:
                await plan.rewrite(conn, applied)
        return txn, plan, applied

    async def _lock(
        self, conn: Conn, agent: str, locks: Locks, ids: list[str], first: Txn | None = None
    ) -> tuple[Txn, list[asyncpg.Record]]:
        """Lock the policy head and `ids`; the transaction's time and policy, read by its
        first step (`first`: a later step's, which keeps them)."""
        if ids:
            rows = await conn.fetch(row_locks().statement(locks.policy_exclusive), ids)
            locked = [r for r in rows if r["id"]]
        else:
            statement = LOCK_HEAD_EXCLUSIVE if locks.policy_exclusive else LOCK_HEAD_SHARED
            rows = await conn.fetch(statement)
            locked = []
        if first is not None:
            return first, locked
        head, now = rows[0]["policy_head"], rows[0]["now"]
        if head == 0 and not locks.policy_exclusive:
            raise NoPolicyError()
        policy = await self.policies.version(conn, head) if head else None
        return Txn(agent_name=agent, policy=policy, at=now), locked

    async def _write_group(self, group: Sequence[Waiting]) -> Sequence[Waiting]:
        """Commands that lock nothing, decided under one share lock of the policy head and
        appended in one statement; answers each, and returns those past the group's size."""
        decided: list[tuple[Waiting, Decided]] = []
        left: Sequence[Waiting] = ()
        async with self.pool.acquire() as conn:
            async with _transaction(conn, None, await self._group_floor(group)):
                shared, _ = await self._lock(conn, group[0].agent, NOTHING_LOCKED, [])
                rows = Rows()
                for n, waiting in enumerate(group):
                    if len(rows.entries) >= MAX_GROUP_WRITES:
                        left = group[n:]
                        break
                    if waiting.withdrawn:  # its caller stopped while the lock was awaited
                        continue
                    txn = replace(shared, agent_name=waiting.agent)
                    try:
                        one = decided_in_group(txn, waiting.command)
                    except Exception as exc:  # its own refusal; the others go on
                        waiting.fail(exc)
                        continue
                    rows.extend(one.rows)
                    waiting.decided = True
                    decided.append((waiting, one))
                if rows.entries:
                    await append(conn, rows)
                    self._wrote(rows)
            lsn = await self._lsn(conn, bool(rows.entries))
            await self._fold(conn)
        for waiting, one in decided:
            try:
                for hook in one.hooks:
                    hook()
                waiting.succeed(Written(one.plan.result(one.applied), lsn))
            except Exception as exc:
                waiting.fail(exc)
        return left

    async def _lsn(self, conn: Conn, wrote: bool) -> Lsn | None:
        if not (self.report_lsn and wrote):
            return None
        return await commit_lsn(conn)

    def _wrote(self, rows: Rows) -> None:
        """Count an append's rows towards each kind's fold and the planner statistics."""
        for kind in registry.kinds():
            fold = kind.fold()
            if fold is not None:
                self._unfolded[kind.name] = self._unfolded.get(kind.name, 0.0) + fold.share(rows)
        self.upkeep.wrote(rows)

    async def _fold(self, conn: Conn) -> None:
        # Off the write transaction: each kind folds what this process appended.
        for kind in registry.kinds():
            fold = kind.fold()
            if fold is None or self._unfolded.get(kind.name, 0.0) < 1:
                continue
            if await fold.fold(conn):
                self._unfolded[kind.name] = 0.0
                self.upkeep.folded()
        self.upkeep.committed()


@asynccontextmanager
async def _transaction(
    conn: Conn, outcome_timeout: float | None, floor: Floor | None
) -> AsyncIterator[None]:
    """A transaction with `floor`'s lanes whose COMMIT, once sent, is seen through (see
    the module's doc; `outcome_timeout` None: the COMMIT is awaited as any statement)."""
    await conn.execute(lane_floor.begin("BEGIN", floor, conn))
    try:
        yield
    except BaseException:
        if not conn.is_closed():
            await conn.execute("ROLLBACK")
        raise
    if outcome_timeout is None:
        await conn.execute("COMMIT")
    else:
        await _commit(conn, conn.execute("COMMIT"), outcome_timeout)


async def _commit(conn: Conn, commit: Awaitable[object], outcome_timeout: float) -> None:
    sent = asyncio.ensure_future(commit)
    try:
        await asyncio.shield(sent)  # cancelling the caller does not cancel the COMMIT
        return
    except asyncio.CancelledError:
        pass
    done, _ = await asyncio.wait({sent}, timeout=outcome_timeout)
    if not done:
        conn.terminate()  # still inside the COMMIT: not handed to anyone else
        sent.add_done_callback(lambda f: f.cancelled() or f.exception())
        raise OutcomeUnknownError(outcome_timeout)
    sent.result()  # its failure, if it failed: then nothing was committed
