"""How a kind's objects are locked as rows with the policy head (`RowLocks`): the
protocols the kind that locks rows implements and `store.ledger.locks` calls, apart
from the lock order itself so that the registry can name them."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg

from store.ledger.command import InForce, Locks, Txn
from store.pool import Conn


class Policies(Protocol):
    """The policies applied, by version (the policy kind's cache)."""

    async def version(self, conn: Conn, number: int) -> InForce: ...

    async def current_version(self, conn: Conn) -> InForce: ...


@dataclass(frozen=True)
class RowsRead:
    """What a command's locked rows give it to decide on (see `Current`)."""

    records: Mapping[str, Any]
    holders: Mapping[tuple[str, str], tuple[Any, ...]]
    hidden_holders: Mapping[tuple[str, str], int]


class RowStep(Protocol):
    """One step's rows, found before they are locked."""

    @property
    def exact(self) -> Mapping[str, str]:
        """Each ident the command names (`Locks.records`), as a full id."""
        ...

    @property
    def ids(self) -> Collection[str]:
        """Every row to lock."""
        ...

    async def check(self, conn: Conn, locked: Sequence[asyncpg.Record]) -> None:
        """Raise `MovedError` if what was found moved before it was locked."""
        ...

    def read(self, txn: Txn, locked: Sequence[asyncpg.Record]) -> RowsRead:
        """The locked rows as the command sees them (refused if it may not)."""
        ...


class RowLocks(Protocol):
    """How a kind's objects are locked as rows with the policy head, in one statement
    sorted by id, before anything else (the record kind's: `Locks.records`)."""

    @property
    def races(self) -> tuple[str, ...]:
        """Unique constraints whose violation is a race the command's retry sees through."""
        ...

    def statement(self, exclusive: bool) -> str:
        """Locks the head (`HEAD`, FOR UPDATE when `exclusive`) and the rows of ids `$1`:
        one row for the head's version and time, with each locked row's columns."""
        ...

    async def step(self, conn: Conn, agent: str, locks: Locks, policies: Policies) -> RowStep:
        """The rows `locks` names, looked up (not locked yet)."""
        ...

    async def first_writes(self, conn: Conn, agent: str, keys: Sequence[str]) -> dict[str, Any]:
        """The objects as first written by `agent` under its idempotency keys."""
        ...
