"""How a kind's objects are locked as rows with the policy head (`RowLocks`): the
protocols the kind that locks rows implements and `store.ledger.locks` calls, apart
from the lock order itself so that the registry can name them. What a command asks of
that kind (`Locks.rows`) and what the kind reads for it (`Current.rows`) are the
kind's own types: the ledger hands them over and looks no further inside."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

import asyncpg

from store.ledger.command import InForce, Locks, Txn
from store.pool import Conn


class Policies(Protocol):
    """The policies applied, by version (the policy kind's cache)."""

    async def version(self, conn: Conn, number: int) -> InForce: ...

    async def current_version(self, conn: Conn) -> InForce: ...

    def fresh(self) -> InForce | None:
        """The version in force as last read, while it is fresh enough (None: read it)."""
        ...

    def remember(self, version: Any) -> None:
        """Keep `version` as the one in force, read now."""
        ...


class RowsRead(Protocol):
    """What a command's locked rows give it to decide on (`Current.rows`)."""

    @property
    def by_id(self) -> Mapping[str, Any]:
        """Every row read, by its full id: what the command's writes follow."""
        ...


class RowStep(Protocol):
    """One step's rows, found before they are locked."""

    @property
    def exact(self) -> Mapping[str, str]:
        """Each ident the command names, as a full id."""
        ...

    @property
    def ids(self) -> Collection[str]:
        """Every row to lock."""
        ...

    async def check(self, conn: Conn, locked: Sequence[asyncpg.Record]) -> None:
        """Raise `MovedError` if what was found moved before it was locked."""
        ...

    async def read(self, conn: Conn, txn: Txn, locked: Sequence[asyncpg.Record]) -> RowsRead:
        """The locked rows as the command sees them (refused if it may not), with what
        else the kind reads for it under the locks."""
        ...


class RowLocks(Protocol):
    """How a kind's objects are locked as rows with the policy head, in one statement
    sorted by id, before anything else (the record kind's: `Locks.rows`)."""

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

    def named_only(self, locks: Locks) -> Sequence[str] | None:
        """The idents of the rows `locks` names, when it asks that kind for nothing else
        (None: it does)."""
        ...

    def written(self, rows: Mapping[str, Any]) -> RowsRead:
        """What a command decides on that locks nothing but rows its transaction wrote
        (`rows`, by ident; none for a command that locks nothing)."""
        ...
