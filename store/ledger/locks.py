"""The locks of a write, taken in one order by every command: the policy head with the
rows a kind locks beside it (`RowLocks`: the record kind's records), then the unique
keys it names, then every ledgered object it names or finds holding one of those keys,
each round sorted. A later step of a command locks nothing the first did not (`Held`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.errors import InvalidInputError, StoreError
from store.ledger import registry
from store.ledger.append import UnknownKindError
from store.ledger.command import Head, Locks, RowRef
from store.ledger.entry import Entry
from store.ledger.registry import Kind
from store.ledger.row_locks import RowLocks
from store.pool import Conn

# The policy head, locked: every write takes it first, alone or with the rows a kind
# locks in the same statement (`RowLocks.statement`).
HEAD = """
WITH head AS (
  SELECT version, clock_timestamp() AS now FROM policy_head WHERE id = 1 FOR {mode}
)
"""
# With no row to lock (new records, policy changes) only the head is locked. A kind's
# statement with an empty array would do too, but PostgreSQL keeps the generic plan it
# makes after five runs on a connection until the table is next analyzed (or the pool
# re-prepares the statement): made while `records` is small, that plan scans the whole
# table, and every ingest after it pays a scan that grows with the memory (on a server
# without autovacuum; bench/README.md has the figure). A lock of named records keeps that
# weakness, for at most a minute (`store.pool.STATEMENT_LIFETIME_SECONDS`).
_LOCK_HEAD = HEAD + "SELECT head.version AS policy_head, head.now FROM head\n"
LOCK_HEAD_SHARED = _LOCK_HEAD.format(mode="SHARE")
LOCK_HEAD_EXCLUSIVE = _LOCK_HEAD.format(mode="UPDATE")

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


class MovedError(StoreError):
    """What a command locks moved between looking it up and locking it: the command is
    run again, and looks it up afresh."""

    code = "CONFLICT"


class StepError(RuntimeError):
    """A later step of a command (`Plan.then`) that breaks the rule of steps: the
    command's fault, never the caller's."""


@dataclass
class Held:
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
                    raise late(f"record '{i}'")
        self.rows.update(ids)

    def take(self, name: str, values: Sequence[str]) -> None:
        if self.later and name not in self.names and self.written.isdisjoint(values):
            raise late(repr(name.replace("\x1f", " ")))
        self.names.add(name)


def late(what: str) -> StepError:
    return StepError(
        f"a later step locks {what}, which the command's first step did not lock and its "
        "transaction did not write: name it in the first step's locks"
    )


def row_locks() -> RowLocks:
    """The registered kind's row locks (one kind has them), found once per registry."""
    global _row_locks
    generation = registry.generation()
    if _row_locks is None or _row_locks[0] != generation:
        found = [locks for kind in registry.kinds() if (locks := kind.row_locks()) is not None]
        if len(found) != 1:
            raise RuntimeError(f"{len(found)} registered kinds lock rows; one must")
        _row_locks = (generation, found[0])
    return _row_locks[1]


# Every write asks for them (a grouped one too, for what it decides on): looked up in the
# registry again only when a kind is registered or removed.
_row_locks: tuple[int, RowLocks] | None = None


Key = tuple[str, str, tuple[str, ...]]


def resolved_keys(locks: Locks, exact: Mapping[str, str]) -> list[Key]:
    """`locks.keys` with each `RowRef` as the full id of the row it names."""
    return [
        (k, name, tuple(exact.get(v, v) if isinstance(v, RowRef) else v for v in values))
        for k, name, values in locks.keys
    ]


async def key_holders(conn: Conn, locks: Locks, keys: Sequence[Key]) -> dict[Key, str]:
    """The objects holding the (locked) keys, by the key as the command gave it."""
    found: dict[Key, str] = {}
    for given, (kind_name, key, values) in zip(locks.keys, keys, strict=True):
        holder = await kind_named(kind_name).holder(conn, key, values)
        if holder is not None:
            found[given] = holder
    return found


async def lock_objects(
    conn: Conn, objects: Sequence[tuple[str, str]], keys: Sequence[Key], held: Held
) -> None:
    """Lock the ledgered objects and unique keys named, each as its kind declares."""
    if not objects and not keys:
        return
    names = []
    for kind_name, object_id in objects:
        kind = kind_named(kind_name)
        if not object_id.startswith(kind.prefix):
            raise InvalidInputError(
                f"'{object_id}' is no {kind_name} id: those start with '{kind.prefix}'"
            )
        names.append(f"{kind_name}\x1f{object_id}")
        held.take(names[-1], (object_id,))
    for kind_name, key, values in keys:
        fields = kind_named(kind_name).unique_keys.get(key)
        if fields is None or len(fields) != len(values):
            raise InvalidInputError(f"{kind_name} declares no unique key {key} of {len(values)}")
        names.append("\x1f".join((kind_name, key, *values)))
        held.take(names[-1], values)
    await conn.execute(LOCK_OBJECTS, names)


_HISTORY = """
SELECT kind, object_id, version, event, actor, at, policy_version, state, prev_hash, hash,
       state_sha256
FROM ledger
WHERE (kind, object_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
ORDER BY kind, object_id, version
"""


async def read_history(conn: Conn, record_ids: Sequence[str]) -> dict[tuple[str, str], list[Entry]]:
    """Every entry of the locked rows and of every object ever attached to them, by
    (kind, id), oldest first (`Locks.history`)."""
    rows_kind = next(k.name for k in registry.kinds() if k.row_locks() is not None)
    wanted = [(rows_kind, i) for i in record_ids]
    for kind in registry.kinds():
        wanted += [(kind.name, i) for i in await kind.ever_attached(conn, record_ids)]
    found: dict[tuple[str, str], list[Entry]] = {}
    if not wanted:
        return found
    for row in await conn.fetch(_HISTORY, [k for k, _ in wanted], [i for _, i in wanted]):
        found.setdefault((row["kind"], row["object_id"]), []).append(Entry.from_row(row))
    return found


async def attached(
    conn: Conn, kind_names: Sequence[str], record_ids: Sequence[str]
) -> list[tuple[str, str]]:
    """The live objects of those kinds attached to the locked records, as (kind, id)."""
    found: list[tuple[str, str]] = []
    for name in kind_names:
        found += [(name, i) for i in await kind_named(name).attached(conn, record_ids)]
    return found


async def read_heads(
    conn: Conn, heads: Sequence[tuple[str, str]], objects: Sequence[tuple[str, str]]
) -> tuple[dict[tuple[str, str], Head], dict[tuple[str, str], Mapping[str, Any]]]:
    """The newest entries of `heads` and `objects`, and the states of `objects`."""
    wanted = list(dict.fromkeys((*heads, *objects)))
    if not wanted:
        return {}, {}
    rows = await conn.fetch(HEADS, [k for k, _ in wanted], [i for _, i in wanted], bool(objects))
    found = {(r["kind"], r["object_id"]): r for r in rows}
    states = {key: found[key]["state"] for key in objects if key in found}
    return {k: Head(r["version"], r["hash"], r["at"]) for k, r in found.items()}, states


def kind_named(name: str) -> Kind:
    kind = registry.kind_of(name)
    if kind is None:
        raise UnknownKindError(name)
    return kind
