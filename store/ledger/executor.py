"""The one way anything is written: every command runs through `Executor.execute`.

1. begin; share-lock the policy head (exclusively for a policy change) and lock
   every record the command names, in sorted id order, in one statement; then the
   unique keys it names, then every other object it names or finds holding a key,
   each round sorted: one order for every command;
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

With `report_lsn`, `run` also answers the WAL position the write committed at or before
(read on its connection right after COMMIT), for read replicas (`store.reads.replicas`):
a standby that has replayed it sees the write.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import asyncpg

from store.errors import (
    AmbiguousIdError,
    InvalidInputError,
    NoPolicyError,
    NotFoundError,
    OutcomeUnknownError,
    RetiredRecordError,
    StoppedError,
    StoreError,
    refusal_for,
)
from store.kinds.policy.in_force import PolicyCache
from store.kinds.record import counts
from store.kinds.record.model import Record, RecordState
from store.kinds.record.resolve import MAX_CANDIDATES, check_record_ident
from store.ledger import registry
from store.ledger.append import UnknownKindError, append, build_rows
from store.ledger.command import (
    Applied,
    Command,
    Current,
    Head,
    Locks,
    Plan,
    RecordRef,
    Txn,
)
from store.ledger.group_commit import (
    DEFAULT_OUTCOME_TIMEOUT,
    MAX_GROUP_WRITES,
    GroupCommit,
    Waiting,
)
from store.ledger.registry import Kind, Rows
from store.ledger.upkeep import ANALYZE_AFTER_ROWS, Upkeep
from store.pool import Conn, Pool
from store.reads.replicas import Lsn, commit_lsn
from store.reads.visibility import RULE

R = TypeVar("R")

# The writes that returned on behalf of the running request: whoever runs a request sets
# a fresh list, so that a request stopped after some of its writes can say so.
COMPLETED_WRITES: ContextVar[list[str] | None] = ContextVar("completed_writes", default=None)

IDEMPOTENCY_CONSTRAINT = "uq_records_created_by_idempotency_key"
# A retry after losing an idempotency race or a policy change sees the winner's state.
_ATTEMPTS = 3
# A command that locks nothing but the shared policy head reads nothing either; such
# commands are written in groups (store.ledger.group_commit).
_NOTHING_LOCKED = Locks()
_NOTHING_READ = Current(records={}, first_writes={}, heads={})

_RECORD_COLUMNS = (
    "id, lane, source_type, authority, content, properties, version, created_at, "
    "updated_at, created_by, ledger_hash, retired_at, retired_by, retired_reason"
)
# The policy head, locked: every write takes it first (see `_lock`).
_HEAD = """
WITH head AS (
  SELECT version, clock_timestamp() AS now FROM policy_head WHERE id = 1 FOR {mode}
)
"""
_LOCK = (
    _HEAD
    + """
SELECT head.version AS policy_head, head.now, r.*
FROM head LEFT JOIN LATERAL (
  SELECT {columns} FROM records WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE
) r ON true
"""
)
LOCK_SHARED = _LOCK.format(mode="SHARE", columns=_RECORD_COLUMNS)
LOCK_EXCLUSIVE = _LOCK.format(mode="UPDATE", columns=_RECORD_COLUMNS)
# With no record to lock (new records, policy changes) only the head is locked. The
# statement above with an empty array would do too, but PostgreSQL keeps the generic
# plan it makes after five runs on a connection until the table is next analyzed (or
# the pool re-prepares the statement): made while `records` is small, that plan scans
# the whole table, and every ingest after it pays a scan that grows with the memory
# (on a server without autovacuum; bench/README.md has the figure). A lock of named
# records keeps that weakness, for at most a minute (`store.pool.STATEMENT_LIFETIME_SECONDS`).
_LOCK_HEAD = _HEAD + "SELECT head.version AS policy_head, head.now FROM head\n"
LOCK_HEAD_SHARED = _LOCK_HEAD.format(mode="SHARE")
LOCK_HEAD_EXCLUSIVE = _LOCK_HEAD.format(mode="UPDATE")

FIRST_WRITES = """
SELECT r.idempotency_key, r.id, r.created_at, r.created_by, l.version, l.at AS updated_at,
       l.hash AS ledger_hash, l.state
FROM records r
JOIN ledger l ON l.kind = 'record' AND l.object_id = r.id AND l.version = 1
WHERE r.created_by = $1 AND r.idempotency_key = ANY($2::text[])
"""

PREFIX = f"""
SELECT id FROM records
WHERE id >= $1 AND id < $1 || 'g' AND {RULE.record("", "$2::text[]")}
ORDER BY id LIMIT $3
"""
# The same among retired records too, for the commands that act on them (`Locks.retired`).
PREFIX_RETIRED_TOO = f"""
SELECT id FROM records
WHERE id >= $1 AND id < $1 || 'g' AND {RULE.lane("", "$2::text[]")}
ORDER BY id LIMIT $3
"""

# Current holders of edge properties: an index scan of the current memberships.
HOLDERS = """
SELECT label, value, record_id FROM edge_properties
WHERE (label, value) IN (SELECT * FROM unnest($1::text[], $2::text[])) AND recorded_to IS NULL
"""

# The values of some labels that records carry now, read from their state (a retired
# record's state keeps the values it held): what they are found on to lock.
CARRIED = """
SELECT DISTINCT p->>0 AS label, p->>1 AS value
FROM records r CROSS JOIN LATERAL jsonb_array_elements(r.properties) p
WHERE r.id = ANY($1::text[]) AND p->>0 = ANY($2::text[])
ORDER BY 1, 2
"""

HEADS = """
SELECT DISTINCT ON (kind, object_id) kind, object_id, version, hash, at,
       CASE WHEN $3 THEN state END AS state
FROM ledger
WHERE (kind, object_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
ORDER BY kind, object_id, version DESC
"""

# Ledgered objects and unique keys, locked in the order of their keys: one order for
# every command, so none waits on another that waits on it.
LOCK_OBJECTS = """
SELECT pg_advisory_xact_lock(k) FROM (
  SELECT DISTINCT hashtextextended(name, 7113007) AS k FROM unnest($1::text[]) AS name
  ORDER BY k
) s
"""


class _HoldersMovedError(StoreError):
    """A value gained or lost holders between looking them up and locking them."""

    code = "CONFLICT"

    def __init__(self) -> None:
        super().__init__("the records carrying that value changed during the call; retry it")


class StepError(RuntimeError):
    """A later step of a command (`Plan.then`) that breaks the rule of steps: the
    command's fault, never the caller's."""


@dataclass
class _Held:
    """What one transaction has locked and written so far. A later step may lock only
    these (`later`), so that it never waits for a lock while holding others taken out
    of the one order."""

    rows: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    later: bool = False

    def take_rows(self, ids: Collection[str]) -> None:
        if self.later:
            for i in sorted(ids):
                if i not in self.rows and i not in self.written:
                    raise _late(f"record '{i}'")
        self.rows.update(ids)

    def take(self, name: str, values: Sequence[str]) -> None:
        if self.later and name not in self.names and self.written.isdisjoint(values):
            raise _late(repr(name.replace("\x1f", " ")))
        self.names.add(name)


def _late(what: str) -> StepError:
    return StepError(
        f"a later step locks {what}, which the command's first step did not lock and its "
        "transaction did not write: name it in the first step's locks"
    )


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
        policies: PolicyCache,
        outcome_timeout: float = DEFAULT_OUTCOME_TIMEOUT,
        report_lsn: bool = False,
        analyze_after: int = ANALYZE_AFTER_ROWS,
    ) -> None:
        self.pool = pool
        self.upkeep = Upkeep(pool, analyze_after)
        self.policies = policies
        self.report_lsn = report_lsn
        self._unfolded = 0.0
        self._outcome_timeout = outcome_timeout
        self._groups = GroupCommit(self._write_group, self._alone, outcome_timeout=outcome_timeout)

    async def execute(self, agent: str, command: Command[R]) -> R:
        return (await self.run(agent, command)).result

    async def run(self, agent: str, command: Command[R]) -> Written[R]:
        """`command`'s result, with its commit's LSN when the executor reports LSNs."""
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # Its request is being stopped, and an earlier write of it took the
            # cancellation to answer its own outcome: this one does not begin.
            raise StoppedError()
        result: Written[R]
        if command.locks() == _NOTHING_LOCKED:
            result = await self._groups.submit(agent, command)
        else:
            result = await self._alone(agent, command)
        completed = COMPLETED_WRITES.get()
        if completed is not None:
            completed.append(type(command).__name__)
        return result

    async def _alone(self, agent: str, command: Command[R]) -> Written[R]:
        for attempt in range(_ATTEMPTS):
            try:
                return await self._run(agent, command)
            except _HoldersMovedError:
                # Another command moved the value meanwhile: look its holders up again.
                if attempt == _ATTEMPTS - 1:
                    raise
            except asyncpg.UniqueViolationError as exc:
                # Two calls raced on one idempotency key: the retry sees the winner's write.
                if exc.constraint_name != IDEMPOTENCY_CONSTRAINT or attempt == _ATTEMPTS - 1:
                    raise
            except asyncpg.PostgresError as exc:
                refusal = refusal_for(exc)
                if refusal is not None:
                    raise refusal from exc
                raise
        raise AssertionError("unreachable")

    async def _run(self, agent: str, command: Command[R]) -> Written[R]:
        hooks: list[Callable[[], None]] = []
        wrote = False
        async with self.pool.acquire() as conn:
            async with _transaction(conn, self._outcome_timeout):
                held = _Held()
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
        self, conn: Conn, agent: str, command: Command[R], held: _Held, first: Txn | None
    ) -> tuple[Txn, Plan[R], Applied]:
        """Lock what `command` names, read it, let it decide and append its writes."""
        locks = command.locks()
        exact = await self._exact_ids(conn, agent, locks.records, locks.retired)
        carried = await self._carried(conn, exact.values(), locks.carried_by_records)
        carrying = (*locks.carrying, *carried)
        holding = await self._holders(conn, carrying)
        ids = set(exact.values()).union(*holding.values())
        held.take_rows(ids)
        txn, rows = await self._lock(conn, agent, locks, sorted(ids), first)
        # Whoever gains a value must lock one of its holders first (an adjustment
        # locks the record it adjusts), so once they are all locked the set holds.
        if carrying and await self._holders(conn, carrying) != holding:
            raise _HoldersMovedError()
        if locks.carried_by_records and not _carries_only(
            rows, exact.values(), locks.carried_by_records, set(carried)
        ):
            raise _HoldersMovedError()
        keys = _resolved_keys(locks, exact)
        attached = await _attached(conn, locks.attached, sorted(set(exact.values())))
        named = (*locks.objects, *attached)
        # Keys before objects, each round in sorted order: an object found holding a
        # key is locked with the objects named, so no command locks an object and then
        # a key another command took before that object.
        await _lock_objects(conn, (), keys, held)
        keyed = await _key_holders(conn, locks, keys)
        objects = (*named, *((k[0], i) for k, i in keyed.items()))
        await _lock_objects(conn, objects, (), held)
        records = self._readable(txn, exact, rows, locks.retired)
        holders, hidden = self._held(txn, holding, rows)
        heads, states = await self._heads(conn, locks.heads, objects)
        current = Current(
            records={**{r.id: r for rs in holders.values() for r in rs}, **records},
            first_writes=await self._first_writes(conn, agent, locks.idempotency_keys),
            heads=heads,
            holders=holders,
            hidden_holders=hidden,
            states=states,
            keyed=keyed,
            attached=tuple(attached),
        )
        plan = command.decide(txn, current)
        applied = Applied(entries=(), records={})
        if plan.writes:
            before = {r.id: r for r in current.records.values()}
            table_rows, entries, written = build_rows(txn, plan.writes, before)
            await append(conn, table_rows)
            applied = Applied(entries=entries, records=written)
            held.written.update(w.object_id for w in plan.writes)
            self._unfolded += counts.fold_share(table_rows)
            self.upkeep.wrote(table_rows)
        return txn, plan, applied

    async def _write_group(self, group: Sequence[Waiting]) -> Sequence[Waiting]:
        """Commands that lock nothing, decided under one share lock of the policy head and
        appended in one statement; answers each, and returns those past the group's size."""
        decided: list[tuple[Waiting, _Decided]] = []
        left: Sequence[Waiting] = ()
        async with self.pool.acquire() as conn:
            async with conn.transaction():
                shared, _ = await self._lock(conn, group[0].agent, _NOTHING_LOCKED, [])
                rows = Rows()
                for n, waiting in enumerate(group):
                    if len(rows.entries) >= MAX_GROUP_WRITES:
                        left = group[n:]
                        break
                    if waiting.withdrawn:  # its caller stopped while the lock was awaited
                        continue
                    txn = replace(shared, agent_name=waiting.agent)
                    try:
                        one = _decided_in_group(txn, waiting.command)
                    except Exception as exc:  # its own refusal; the others go on
                        waiting.fail(exc)
                        continue
                    rows.extend(one.rows)
                    waiting.decided = True
                    decided.append((waiting, one))
                if rows.entries:
                    await append(conn, rows)
                    self._unfolded += counts.fold_share(rows)
                    self.upkeep.wrote(rows)
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

    async def _fold(self, conn: Conn) -> None:
        # Off the write transaction: fold the count deltas this process appended.
        if self._unfolded >= 1 and await counts.fold(conn):
            self._unfolded = 0.0
            self.upkeep.folded()
        self.upkeep.committed()

    async def _exact_ids(
        self, conn: Conn, agent: str, idents: Sequence[str], retired: bool = False
    ) -> dict[str, str]:
        """Each ident's full id; prefixes resolve among the records the agent may read
        (and, for a command acting on retired records, among those too)."""
        cleaned = {ident: check_record_ident(ident) for ident in idents}
        prefixes = [c for c in cleaned.values() if len(c) < 35]
        if not prefixes:
            return cleaned
        in_force = await self.policies.current_version(conn)
        lanes = in_force.policy.agent(agent).readable_lanes(in_force.policy)
        full: dict[str, str] = {}
        statement = PREFIX_RETIRED_TOO if retired else PREFIX
        for prefix in prefixes:
            # Every id starting with the prefix sorts between it and it followed by 'g'.
            found = [
                r["id"] for r in await conn.fetch(statement, prefix, lanes, MAX_CANDIDATES + 1)
            ]
            if not found:
                raise NotFoundError("record", prefix)
            if len(found) > 1:
                raise AmbiguousIdError(prefix, found[:MAX_CANDIDATES])
            full[prefix] = found[0]
        return {ident: full.get(c, c) for ident, c in cleaned.items()}

    async def _lock(
        self, conn: Conn, agent: str, locks: Locks, ids: list[str], first: Txn | None = None
    ) -> tuple[Txn, list[asyncpg.Record]]:
        """Lock the policy head and `ids`; the transaction's time and policy, read by its
        first step (`first`: a later step's, which keeps them)."""
        if ids:
            statement = LOCK_EXCLUSIVE if locks.policy_exclusive else LOCK_SHARED
            rows = await conn.fetch(statement, ids)
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

    @staticmethod
    def _readable(
        txn: Txn, exact: Mapping[str, str], rows: Sequence[asyncpg.Record], retired: bool = False
    ) -> dict[str, Record]:
        """The locked records by the caller's ident; one it may not read is not found, and
        a retired one is refused (said so) unless the command acts on retired records."""
        if not exact:
            return {}
        lanes = set(txn.agent.readable_lanes(txn.rules))
        found = {row["id"]: _record(row) for row in rows if RULE.may_read(row["lane"], lanes)}
        missing = [ident for ident, rid in exact.items() if rid not in found]
        if missing:
            raise NotFoundError("record", missing[0])
        if not retired:
            for ident, rid in exact.items():
                gone = found[rid].retirement
                if gone is not None:
                    raise RetiredRecordError(ident, gone.at, gone.actor, gone.reason)
        return {ident: found[rid] for ident, rid in exact.items()}

    @staticmethod
    async def _holders(
        conn: Conn, carrying: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], frozenset[str]]:
        if not carrying:
            return {}
        found: dict[tuple[str, str], set[str]] = {key: set() for key in carrying}
        rows = await conn.fetch(HOLDERS, [k[0] for k in carrying], [k[1] for k in carrying])
        for row in rows:
            found[(row["label"], row["value"])].add(row["record_id"])
        return {key: frozenset(ids) for key, ids in found.items()}

    @staticmethod
    async def _carried(
        conn: Conn, record_ids: Collection[str], labels: Sequence[str]
    ) -> list[tuple[str, str]]:
        """The values with `labels` that the records carry now (read before locking)."""
        if not labels or not record_ids:
            return []
        rows = await conn.fetch(CARRIED, list(record_ids), list(labels))
        return [(row["label"], row["value"]) for row in rows]

    @staticmethod
    def _held(
        txn: Txn, holding: Mapping[tuple[str, str], frozenset[str]], rows: Sequence[asyncpg.Record]
    ) -> tuple[dict[tuple[str, str], tuple[Record, ...]], dict[tuple[str, str], int]]:
        """Each value's locked holders the caller may read, and how many it may not."""
        if not holding:
            return {}, {}
        lanes = set(txn.agent.readable_lanes(txn.rules))
        by_id = {row["id"]: row for row in rows}
        holders: dict[tuple[str, str], tuple[Record, ...]] = {}
        hidden: dict[tuple[str, str], int] = {}
        for key, ids in holding.items():
            seen = [by_id[i] for i in sorted(ids)]
            holders[key] = tuple(_record(r) for r in seen if RULE.may_read(r["lane"], lanes))
            hidden[key] = len(seen) - len(holders[key])
        return holders, hidden

    @staticmethod
    async def _first_writes(conn: Conn, agent: str, keys: Sequence[str]) -> dict[str, Record]:
        if not keys:
            return {}
        rows = await conn.fetch(FIRST_WRITES, agent, list(keys))
        return {row["idempotency_key"]: _record(row, state=row["state"]) for row in rows}

    @staticmethod
    async def _heads(
        conn: Conn, heads: Sequence[tuple[str, str]], objects: Sequence[tuple[str, str]]
    ) -> tuple[dict[tuple[str, str], Head], dict[tuple[str, str], Mapping[str, Any]]]:
        """The newest entries of `heads` and `objects`, and the states of `objects`."""
        wanted = list(dict.fromkeys((*heads, *objects)))
        if not wanted:
            return {}, {}
        rows = await conn.fetch(
            HEADS, [k for k, _ in wanted], [i for _, i in wanted], bool(objects)
        )
        found = {(r["kind"], r["object_id"]): r for r in rows}
        states = {key: found[key]["state"] for key in objects if key in found}
        return {k: Head(r["version"], r["hash"], r["at"]) for k, r in found.items()}, states


Key = tuple[str, str, tuple[str, ...]]


def _resolved_keys(locks: Locks, exact: Mapping[str, str]) -> list[Key]:
    """`locks.keys` with each `RecordRef` as the full id of the record it names."""
    return [
        (k, name, tuple(exact.get(v, v) if isinstance(v, RecordRef) else v for v in values))
        for k, name, values in locks.keys
    ]


async def _key_holders(conn: Conn, locks: Locks, keys: Sequence[Key]) -> dict[Key, str]:
    """The objects holding the (locked) keys, by the key as the command gave it."""
    found: dict[Key, str] = {}
    for given, (kind_name, key, values) in zip(locks.keys, keys, strict=True):
        holder = await _kind(kind_name).holder(conn, key, values)
        if holder is not None:
            found[given] = holder
    return found


async def _lock_objects(
    conn: Conn, objects: Sequence[tuple[str, str]], keys: Sequence[Key], held: _Held
) -> None:
    """Lock the ledgered objects and unique keys named, each as its kind declares."""
    if not objects and not keys:
        return
    names = []
    for kind_name, object_id in objects:
        kind = _kind(kind_name)
        if not object_id.startswith(kind.prefix):
            raise InvalidInputError(
                f"'{object_id}' is no {kind_name} id: those start with '{kind.prefix}'"
            )
        names.append(f"{kind_name}\x1f{object_id}")
        held.take(names[-1], (object_id,))
    for kind_name, key, values in keys:
        fields = _kind(kind_name).unique_keys.get(key)
        if fields is None or len(fields) != len(values):
            raise InvalidInputError(f"{kind_name} declares no unique key {key} of {len(values)}")
        names.append("\x1f".join((kind_name, key, *values)))
        held.take(names[-1], values)
    await conn.execute(LOCK_OBJECTS, names)


@dataclass(frozen=True)
class _Decided:
    """A command of a group as decided, every step of it: the rows it appends, its
    last step's plan and what that applied, and every step's hooks."""

    rows: Rows
    plan: Plan[Any]
    applied: Applied
    hooks: tuple[Callable[[], None], ...]


def _decided_in_group(txn: Txn, command: Command[Any]) -> _Decided:
    """A command that locks nothing, decided on nothing read; each later step of it on
    what its earlier steps wrote, as they wrote it (nothing else may a later step
    name: its first step locked nothing)."""
    plan = command.decide(txn, _NOTHING_READ)
    rows, entries, written = build_rows(txn, plan.writes, {})
    made = dict(written)
    objects = {w.object_id for w in plan.writes}
    kinds_written = {w.kind for w in plan.writes}
    applied = Applied(entries=entries, records=written)
    hooks = list(plan.after_commit)
    while plan.then is not None:
        following = plan.then(applied)
        if following is None:
            break
        plan = following.decide(txn, _on_written(following.locks(), made, objects, kinds_written))
        if any(w.object_id in objects for w in plan.writes):
            raise StepError(
                "a later step of a command written in a group writes an object an earlier "
                "step wrote: one append holds one version of each object"
            )
        more, entries, written = build_rows(txn, plan.writes, made)
        rows.extend(more)
        made |= written
        objects |= {w.object_id for w in plan.writes}
        kinds_written |= {w.kind for w in plan.writes}
        applied = Applied(entries=entries, records=written)
        hooks += plan.after_commit
    return _Decided(rows, plan, applied, tuple(hooks))


def _on_written(
    locks: Locks, made: Mapping[str, Record], objects: Collection[str], kinds_written: set[str]
) -> Current:
    """What a later step of a group's command decides on: the records its earlier steps
    made. A key it names holds one of their ids, and no object of the key's kind was
    written yet, so nothing holds it."""
    others = replace(locks, records=(), keys=())
    if others != _NOTHING_LOCKED:
        raise _late("more than the records its earlier steps wrote and their keys")
    for ident in locks.records:
        if ident not in made:
            raise _late(f"record '{ident}'")
    for kind_name, key, values in locks.keys:
        if kind_name in kinds_written or not any(v in objects for v in values):
            raise _late(f"the {kind_name} key {key} of {list(values)}")
    return Current(records={i: made[i] for i in locks.records}, first_writes={}, heads={})


async def _attached(
    conn: Conn, kind_names: Sequence[str], record_ids: Sequence[str]
) -> list[tuple[str, str]]:
    """The live objects of those kinds attached to the locked records, as (kind, id)."""
    found: list[tuple[str, str]] = []
    for name in kind_names:
        found += [(name, i) for i in await _kind(name).attached(conn, record_ids)]
    return found


def _kind(name: str) -> Kind:
    kind = registry.kind_of(name)
    if kind is None:
        raise UnknownKindError(name)
    return kind


def _carries_only(
    rows: Sequence[asyncpg.Record],
    record_ids: Collection[str],
    labels: Sequence[str],
    carried: set[tuple[str, str]],
) -> bool:
    """Whether the locked records carry no value of `labels` besides those read before
    locking (one gained meanwhile has holders that were not locked)."""
    wanted = set(record_ids)
    for row in rows:
        if row["id"] in wanted:
            for label, value in row["properties"]:
                if label in labels and (label, value) not in carried:
                    return False
    return True


@asynccontextmanager
async def _transaction(conn: Conn, outcome_timeout: float) -> AsyncIterator[None]:
    """A transaction whose COMMIT, once sent, is seen through (see the module's doc)."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        yield
    except BaseException:
        await transaction.rollback()
        raise
    await _commit(conn, transaction.commit(), outcome_timeout)


async def _commit(conn: Conn, commit: Awaitable[None], outcome_timeout: float) -> None:
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


def _record(row: Any, state: Mapping[str, Any] | None = None) -> Record:
    """A record from a records row, or from a ledger entry's state with its bookkeeping."""
    if state is None:
        return Record.from_row(row)
    return Record(
        id=row["id"],
        version=row["version"],
        state=RecordState.from_json(state),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        created_by=row["created_by"],
        ledger_hash=row["ledger_hash"],
    )
