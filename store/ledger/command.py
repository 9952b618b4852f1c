"""The protocol every write command follows, and what its decision returns.

A command says what it locks (`Locks`), decides purely from the current state under
the policy in force (`decide`), and returns a `Plan`: the new versions to append,
each with the audit events that report it, and how to build its result once they
are written. A plan may name a next step (`Plan.then`): a command decided in the same
transaction on the state its writes left, so that what needs those writes to exist
(an edge from a record being made) is written with them, all or nothing.
`store.ledger.executor.Executor` runs every command the same way; a new capability is
a new class here, never a second path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from policies.model import AgentProfile, Policy
from store.errors import NoPolicyError
from store.ledger.entry import Entry

R = TypeVar("R")
# What the kind that locks rows read under a command's locks (the record kind's
# `RecordsRead`): the ledger hands it to the command and looks no further inside it.
Read = TypeVar("Read")
# A row a command writes, as the kind whose rows they are reads it (the record kind's
# `Record`): the ledger keys rows by their `id` and looks no further inside one.
Row = TypeVar("Row")


class RowRef(str):
    """A unique key's value naming a row by the ident a command locks it by in
    `Locks.rows` (an id or a prefix): the key is locked with the full id."""

    __slots__ = ()


@dataclass(frozen=True)
class Locks:
    """What a command reads and locks before it decides.

    `rows`: what it locks of the kind that locks rows with the policy head, before
    anything else, as that kind reads the request (the record kind's `Records`: record
    ids or prefixes, the holders of values, idempotency keys); None: no row.
    `policy_exclusive`: take the policy head FOR UPDATE (applying a policy) instead
    of sharing it.
    `heads`: other ledgered objects (kind, id) whose newest entry it needs.
    `objects`: ledgered objects of any kind (kind, id) it locks, with their newest
    entry and state read under the lock (`Current.heads`, `Current.states`).
    `keys`: unique keys its kind declares (kind, key name, the key's values), locked
    whether or not an object holds them yet, so two commands cannot both create one.
    A value given as a `RowRef` names one of the rows and is locked as the full id it
    resolves to (so a key made of record ids takes prefixes as they do). The object
    holding each key, as its kind looks it up (`Kind.holder`), is then locked too and
    read like `objects` (`Current.keyed`).
    Objects and keys are locked after the rows, in one sorted order of all of them.
    `attached`: kinds whose live objects attached to the locked rows (`Kind.attached`)
    are locked as `objects` too, with their newest entry and state, once the rows are.
    `history`: read every entry of the locked rows and of every object of any kind ever
    attached to them (`Kind.ever_attached`), oldest first (`Current.history`): what an
    erasure rewrites. An object no longer live is never written again, so its entries
    need no lock.
    """

    rows: Hashable | None = None
    policy_exclusive: bool = False
    heads: tuple[tuple[str, str], ...] = ()
    objects: tuple[tuple[str, str], ...] = ()
    keys: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    attached: tuple[str, ...] = ()
    history: bool = False


@dataclass(frozen=True)
class Head:
    """The newest entry of a ledgered object: what the next entry chains to."""

    version: int
    hash: str
    at: datetime


@dataclass(frozen=True)
class Current(Generic[Read]):
    """The state a command decides on, read under its locks: what the kind that locks
    rows read of them (`rows`), and any ledgered object by (kind, id)."""

    rows: Read
    heads: Mapping[tuple[str, str], Head] = field(default_factory=dict)
    # The objects attached to the locked rows (`Locks.attached`), as (kind, id).
    attached: tuple[tuple[str, str], ...] = ()
    # (kind, id) -> the newest state of each object `Locks.objects` names that exists.
    states: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    # Each of `Locks.keys`, as the command gave it -> the id of the object holding it
    # (its state and head are in `states` and `heads`); absent: none holds it.
    keyed: Mapping[tuple[str, str, tuple[str, ...]], str] = field(default_factory=dict)
    # (kind, id) -> every entry of the object, oldest first (`Locks.history`).
    history: Mapping[tuple[str, str], Sequence[Entry]] = field(default_factory=dict)

    def head(self, kind: str, object_id: str) -> Head | None:
        """The newest entry of a locked object (None: it does not exist yet)."""
        return self.heads.get((kind, object_id))


class InForce(Protocol):
    """A policy applied (the policy kind's version): the rules a command decides under."""

    @property
    def version(self) -> int: ...

    @property
    def yaml(self) -> str: ...

    @property
    def policy(self) -> Policy: ...


@dataclass(frozen=True)
class Txn:
    """Who decides, under which policy (None before the first), and the database clock."""

    agent_name: str
    policy: InForce | None
    at: datetime

    @property
    def in_force(self) -> InForce:
        if self.policy is None:
            raise NoPolicyError()
        return self.policy

    @property
    def policy_version(self) -> int:
        return 0 if self.policy is None else self.policy.version

    @property
    def rules(self) -> Policy:
        return self.in_force.policy

    @property
    def agent(self) -> AgentProfile:
        return self.rules.agent(self.agent_name)


@dataclass(frozen=True)
class Event:
    """An audit event to append beside the entry it reports."""

    kind: str
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class Write:
    """One new version of one ledgered object, with the events that report it.

    `previous` is the head it follows (None for a new object). `lane` and
    `record_id` go on its events; `idempotency_key` on a new record's row.
    """

    kind: str
    object_id: str
    event: str
    state: Mapping[str, Any]
    previous: Head | None
    events: tuple[Event, ...]
    lane: str | None = None
    record_id: str | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Applied(Generic[Row]):
    """What the executor wrote: entries in plan order, and records as they now are."""

    entries: Sequence[Entry]
    records: Mapping[str, Row]


@dataclass(frozen=True)
class Plan(Generic[R]):
    """A command's decision: writes to append (none: nothing changes) and its result.

    `then`, given what these writes applied, names the next step: a command that the
    executor locks, reads for and decides in the same transaction once these writes
    are appended, so that it sees them (None: there is none, and `result` is the
    command's result; otherwise the last step's is). A later step may lock only what
    the first step locked, or objects the transaction wrote: whatever a later step
    could wait for is locked by the first, in the one order of every lock
    (`store.ledger.executor`).

    `rewrite`, given the step's connection and what its writes applied, rewrites in the
    same transaction what those writes erase (`store.kinds.record.erase`): the one write
    that changes rows already written, through the database's own narrow exception to
    the append-only rule, never a table opened to the gateway."""

    writes: Sequence[Write]
    result: Callable[[Applied[Any]], R]
    after_commit: Sequence[Callable[[], None]] = field(default_factory=tuple)
    then: Callable[[Applied[Any]], Command[R] | None] | None = None
    rewrite: Callable[[Any, Applied[Any]], Awaitable[None]] | None = None


class Command(Protocol[R]):
    """The tiny protocol every write command implements."""

    def locks(self) -> Locks: ...

    def decide(self, txn: Txn, current: Current[Any]) -> Plan[R]: ...
