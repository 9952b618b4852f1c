"""The registry of ledger kinds: each kind of ledgered object declared once.

A kind says its id prefix, the projection tables it moves (with the append
statement's part for each), the pure rule that moves them (`writer`, on the write
path) and replays them (`replay`, in verify and import), the audit events its entries
imply, and the unique keys a command may lock it by; and what the write path asks of
it: how commands lock its objects as rows (`row_locks`, the record kind's) and what
follows a commit (`fold`). The append statement, the executor, `verify`,
export/import, the runtime role's grants and the feed's event kinds loop over
`kinds()`; nothing else names a kind. A new kind is one package under `store/kinds/`,
one line there that registers it (`store.kinds`), and its migration.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from store.ledger.implied import Links

if TYPE_CHECKING:
    from store.ledger.command import Current, Txn, Write
    from store.ledger.entry import Entry
    from store.ledger.implied import Implied, Shared
    from store.ledger.report import Report
    from store.ledger.row_locks import RowLocks
    from store.pool import Conn


@dataclass(frozen=True)
class Cte:
    """One data-modifying part of the append statement.

    `sql` is its body; `{rows}` in it stands for this part's rows, a JSON parameter
    expanded as `x` with `columns` (name, SQL type). A part without columns takes no
    rows (it follows another part, as the policy head follows new policy versions).
    """

    name: str
    sql: str
    columns: tuple[tuple[str, str], ...] = ()


def insert(name: str, table: str, columns: Sequence[tuple[str, str]]) -> Cte:
    """The common part: insert every row as it comes."""
    names = ", ".join(c for c, _ in columns)
    return Cte(name, f"INSERT INTO {table} ({names})\nSELECT {names} FROM {{rows}}", tuple(columns))


@dataclass(frozen=True)
class Table:
    """A table a kind moves; import copies its rows in `columns` order. `grant`: what
    the runtime role may do there besides SELECT and INSERT: "projection" (UPDATE: a
    cache the ledger rebuilds), "append" (nothing more: it is history), "folded"
    (DELETE: rows folded into another table)."""

    name: str
    columns: tuple[str, ...] = ()
    grant: str = "projection"


Copy = Callable[[str, tuple[Any, ...]], Awaitable[None]]


class Writer(Protocol):
    """Moves a kind's projections for one command's writes (the write path)."""

    def add(self, write: Write, entry: Entry, rows: Rows) -> Any:
        """Add the rows `entry` moves; return the object as it now is."""
        ...

    def finish(self, rows: Rows) -> None:
        """Add the rows that sum up the command's writes of this kind."""
        ...


class Replay(Protocol):
    """Replays a kind's objects from the ledger (verify and import)."""

    def object(self, entries: Sequence[Entry]) -> Iterable[tuple[str, tuple[Any, ...]]]:
        """Move through one object's chain; the rows it projects to, by table, each in
        that table's `columns` order."""
        ...

    async def compare(self, conn: Conn, report: Report) -> None:
        """verify: the live tables against what was replayed (kept only if `keep`)."""
        ...

    async def finish(self, conn: Conn, copy: Copy) -> None:
        """import: what follows the copied rows (a head, counts)."""
        ...


class Fold(Protocol):
    """What a kind does after commits, off the write transaction, once the writes of
    this process come to it: the record kind folds its count deltas into the counts."""

    def share(self, rows: Rows) -> float:
        """How far one append's rows bring this process towards a fold, due at 1."""
        ...

    async def fold(self, conn: Conn) -> bool:
        """Fold; False when it could not now (another process is folding)."""
        ...


class Projected(Protocol):
    """An object as one entry projects it: one row of its table."""

    def row(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class RowWriter:
    """The writer of a kind whose every entry moves one row of one part of the append
    statement (`part`), with nothing to sum up after the command's writes."""

    project: Callable[[Entry], Projected]
    part: str

    def add(self, write: Write, entry: Entry, rows: Rows) -> Any:
        projected = self.project(entry)
        rows.part(self.part).append(projected.row())
        return projected

    def finish(self, rows: Rows) -> None:
        pass


class NewestRowReplay:
    """The replay of a kind projected to one row per object, its newest entry's, in one
    table keyed by id; verify names every object whose row differs from its rebuild."""

    def __init__(
        self,
        keep: bool,
        what: str,
        table: Table,
        project: Callable[[Entry], Projected],
        from_row: Callable[[dict[str, Any]], object],
    ) -> None:
        self.keep = keep
        self.what = what
        self.table = table
        self.project = project
        self.from_row = from_row
        self.rebuilt: dict[str, object] = {}

    def object(self, entries: Sequence[Entry]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        projected = self.project(entries[-1])
        if self.keep:
            self.rebuilt[entries[-1].object_id] = projected
        row = projected.row()
        yield self.table.name, tuple(row[c] for c in self.table.columns)

    async def compare(self, conn: Conn, report: Report) -> None:
        sql = f"SELECT {', '.join(self.table.columns)} FROM {self.table.name}"
        live = {row["id"]: self.from_row(dict(row)) for row in await conn.fetch(sql)}
        table = self.table.name
        for ident in sorted(self.rebuilt.keys() - live.keys()):
            report.problems.append(f"{self.what} {ident}: in the ledger but missing from {table}")
        for ident in sorted(live.keys() - self.rebuilt.keys()):
            report.problems.append(f"{self.what} {ident}: in {table} but has no ledger entry")
        for ident in sorted(live.keys() & self.rebuilt.keys()):
            if live[ident] != self.rebuilt[ident]:
                report.problems.append(f"{self.what} {ident}: differs from its ledger entries")

    async def finish(self, conn: Conn, copy: Copy) -> None:
        pass


class Kind(Protocol):
    """The declaration of one ledger kind."""

    @property
    def name(self) -> str: ...

    @property
    def prefix(self) -> str:
        """Its ids start with this (a single object has it as its fixed id)."""
        ...

    @property
    def ctes(self) -> tuple[Cte, ...]:
        """Its parts of the append statement, in order."""
        ...

    @property
    def tables(self) -> tuple[Table, ...]: ...

    @property
    def event_kinds(self) -> tuple[str, ...]: ...

    @property
    def unique_keys(self) -> Mapping[str, tuple[str, ...]]:
        """Its unique keys by name, each the fields it is made of; a command locks one
        by its values (`Locks.keys`)."""
        ...

    def describe(self, object_id: str) -> str:
        """How problems name one of its objects."""
        ...

    def writer(self, before: Mapping[str, Any]) -> Writer:
        """Its writer for one command; `before`: the records the command locked, by id."""
        ...

    def replay(self, keep: bool) -> Replay: ...

    def implied(
        self, before: Mapping[str, Any] | None, entry: Entry, links: Links
    ) -> tuple[Shared, list[Implied]] | str:
        """The events `entry` implies, or why none can be said."""
        ...

    def row_locks(self) -> RowLocks | None:
        """How commands lock its objects as rows with the policy head (`Locks.rows`);
        one kind has them, the record kind."""
        ...

    def fold(self) -> Fold | None:
        """What it does after commits (None: nothing)."""
        ...

    def links(self) -> Links:
        """What its entries say about each other, gathered while verify reads them (one
        for each run)."""
        ...

    def saw_last(self, state: Mapping[str, Any], object_id: str, links: Links) -> None:
        """An object's newest state, after its events were checked."""
        ...

    async def holder(self, conn: Conn, key: str, values: tuple[str, ...]) -> str | None:
        """The id of the object holding the unique key `key` with `values` now (None:
        none does), read once the key is locked."""
        ...

    async def attached(self, conn: Conn, record_ids: Sequence[str]) -> list[str]:
        """The ids of its live objects attached to those records (a typed edge to or
        from one), read once the records are locked (`Locks.attached`): a command that
        attaches one locks the records it attaches to, so none is added meanwhile."""
        ...

    async def ever_attached(self, conn: Conn, record_ids: Sequence[str]) -> list[str]:
        """The ids of its objects, live or not, ever attached to those records (what an
        erasure of them reads: `Locks.history`)."""
        ...

    def erased(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """One of its states without what it quotes of the record it is attached to (an
        erasure of that record), or None when it holds nothing of it."""
        ...

    def erased_rows(self) -> str | None:
        """SQL moving its projection's rows, of the ids in $1 (text[]), to their newest
        entry's erased state (None: it has nothing to erase)."""
        ...

    def retired_with(
        self, txn: Txn, current: Current[Any], object_id: str, records: Collection[str]
    ) -> Write | None:
        """The version retiring one of its objects attached to `records`, which are
        being retired, in the same transaction (None: it needs none, or it is attached
        to none of them but to another record the transaction locked)."""
        ...


class KindDefaults:
    """What most kinds declare alike: problems name an object by its kind and id, no
    command locks its objects as rows, nothing follows a commit, its events name no
    other object, an object's last state needs no check of its own, and no key is
    looked up."""

    name: str

    def describe(self, object_id: str) -> str:
        return f"{self.name} {object_id}"

    def row_locks(self) -> RowLocks | None:
        return None

    def fold(self) -> Fold | None:
        return None

    def links(self) -> Links:
        return Links()

    def saw_last(self, state: Mapping[str, Any], object_id: str, links: Links) -> None:
        pass

    async def holder(self, conn: Conn, key: str, values: tuple[str, ...]) -> str | None:
        return None

    async def attached(self, conn: Conn, record_ids: Sequence[str]) -> list[str]:
        return []

    async def ever_attached(self, conn: Conn, record_ids: Sequence[str]) -> list[str]:
        return []

    def erased(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return None

    def erased_rows(self) -> str | None:
        return None

    def retired_with(
        self, txn: Txn, current: Current[Any], object_id: str, records: Collection[str]
    ) -> Write | None:
        return None


class Rows:
    """The rows one command (or a group of them) appends: ledger entries, audit events,
    and each append part's rows by its name."""

    __slots__ = ("entries", "events", "parts")

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.parts: dict[str, list[dict[str, Any]]] = {}

    def part(self, name: str) -> list[dict[str, Any]]:
        found = self.parts.get(name)
        if found is None:
            found = self.parts[name] = []
        return found

    def extend(self, other: Rows) -> None:
        """Add another command's rows (group commit appends several commands at once)."""
        self.entries.extend(other.entries)
        self.events.extend(other.events)
        for name, rows in other.parts.items():
            self.part(name).extend(rows)


_registry: dict[str, Kind] = {}
_generation = 0


def register(kind: Kind) -> None:
    """Add a kind; everything built from the registry is rebuilt. The built-in kinds
    register themselves when `store.kinds` is first imported."""
    global _generation
    if kind.name in _registry:
        raise ValueError(f"ledger kind '{kind.name}' is registered already")
    names = {c.name for k in _registry.values() for c in k.ctes}
    clash = sorted(names & {c.name for c in kind.ctes})
    if clash:
        raise ValueError(f"append parts {clash} of kind '{kind.name}' are another kind's")
    _registry[kind.name] = kind
    _generation += 1


def unregister(name: str) -> None:
    """Remove a kind registered with `register`."""
    global _generation
    del _registry[name]
    _generation += 1


def kinds() -> tuple[Kind, ...]:
    """Every registered kind, in registration order (the built-in ones first)."""
    return tuple(_loaded().values())


# Every write appends to these, whatever its kind; each kind's own tables join them.
EVERY_WRITE_TABLES = ("ledger", "audit_events")


def tables(grant: str) -> tuple[str, ...]:
    """Every registered kind's tables with `grant` ("projection", "append", "folded")."""
    return tuple(t.name for kind in kinds() for t in kind.tables if t.grant == grant)


def generation() -> int:
    """Changes whenever a kind is registered or removed: what is built from the
    registry is rebuilt when it changes."""
    _loaded()
    return _generation


def kind_of(name: str) -> Kind | None:
    return _loaded().get(name)


def describe(kind: str, object_id: str) -> str:
    found = kind_of(kind)
    return found.describe(object_id) if found is not None else f"{kind} {object_id}"


def _loaded() -> dict[str, Kind]:
    if not _registry:
        # Nothing can be written or read without the built-in kinds.
        raise RuntimeError("no ledger kind is registered: import store.kinds first")
    return _registry


def event_kinds() -> tuple[str, ...]:
    """The audit event kinds of every registered kind."""
    return tuple(e for kind in kinds() for e in kind.event_kinds)
