"""How a command locks the records it names (`Records`, its `Locks.rows`): with the
policy head, in one statement, in sorted id order, together with the current holders of
the values it names (`Records.carrying`, `Records.carried_by_records`); prefixes resolve
among the records its agent may read. What it reads under those locks (`RecordsRead`,
its `Current.rows`) is the record kind's too. The executor asks for these through the
kind (`RecordKind.row_locks`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from store.errors import AmbiguousIdError, NotFoundError, RetiredRecordError
from store.kinds.record.model import Record, RecordState
from store.kinds.record.resolve import MAX_CANDIDATES, check_record_ident, named_sql
from store.ledger.command import Locks, Txn
from store.ledger.locks import HEAD, MovedError
from store.ledger.row_locks import Policies
from store.pool import Conn
from store.reads.visibility import RULE

IDEMPOTENCY_CONSTRAINT = "uq_records_created_by_idempotency_key"

_RECORD_COLUMNS = (
    "id, lane, source_type, authority, content, properties, version, created_at, "
    "updated_at, created_by, ledger_hash, retired_at, retired_by, retired_reason, expires_at, "
    # The one part of a record's state `records` leaves out: its vector, from its entry.
    "(SELECT l.state->'embedding' FROM ledger l WHERE l.kind = 'record' "
    "AND l.object_id = records.id AND l.version = records.version) AS embedding, "
    # And whether it was erased, which `records` does not say either.
    "(SELECT l.state->'erased' FROM ledger l WHERE l.kind = 'record' "
    "AND l.object_id = records.id AND l.version = records.version) AS erased"
)
_LOCK = (
    HEAD
    + """
SELECT head.version AS policy_head, head.now, r.*
FROM head LEFT JOIN LATERAL (
  SELECT {columns} FROM records WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE
) r ON true
"""
)
LOCK_SHARED = _LOCK.format(mode="SHARE", columns=_RECORD_COLUMNS)
LOCK_EXCLUSIVE = _LOCK.format(mode="UPDATE", columns=_RECORD_COLUMNS)

FIRST_WRITES = """
SELECT r.idempotency_key, r.id, r.created_at, r.created_by, l.version, l.at AS updated_at,
       l.hash AS ledger_hash, l.state
FROM records r
JOIN ledger l ON l.kind = 'record' AND l.object_id = r.id AND l.version = 1
WHERE r.created_by = $1 AND r.idempotency_key = ANY($2::text[])
"""

PREFIX = f"""
SELECT id FROM records
WHERE {named_sql("", "$1")} AND {RULE.record("", "$2::text[]")}
ORDER BY id LIMIT $3
"""
# The same among retired records too, for the commands that act on them (`Locks.retired`).
PREFIX_RETIRED_TOO = f"""
SELECT id FROM records
WHERE {named_sql("", "$1")} AND {RULE.lane("", "$2::text[]")}
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


class HoldersMovedError(MovedError):
    """A value gained or lost holders between looking them up and locking them."""

    def __init__(self) -> None:
        super().__init__("the records carrying that value changed during the call; retry it")


@dataclass(frozen=True)
class Records:
    """What a command locks of records (its `Locks.rows`).

    `ids`: record ids or unique prefixes, locked FOR UPDATE in sorted id order so that
    commands touching several records never deadlock each other.
    `idempotency_keys`: the caller's keys whose first writes it must see
    (`RecordsRead.first_writes`).
    `carrying`: edge properties (label, value) whose current holders it locks with
    `ids`, in the same sorted order: a command that removes a connection, a group or a
    chain link names the value, not the records that carry it.
    `carried_by_records`: labels whose values `ids` carry, each locked with its holders
    as if named in `carrying`: an adjustment changes the chains of the records it
    adjusts, which it knows only by reading them.
    `retired`: the command acts on retired records too (retiring, restoring): prefixes
    resolve among them and they are handed to it; any other command is refused a
    retired record (`RetiredRecordError`), and so is a record expired by the write's
    instant (its tombstone not written yet), as if it were retired.
    `engine`: the engine acts (expiry's tombstones), on records of every lane; named by
    exact id only.
    """

    ids: tuple[str, ...] = ()
    idempotency_keys: tuple[str, ...] = ()
    carrying: tuple[tuple[str, str], ...] = ()
    carried_by_records: tuple[str, ...] = ()
    retired: bool = False
    engine: bool = False

    def locks(self, **rest: Any) -> Locks:
        """The `Locks` of a command that locks these records and `rest` (the ledger's own
        fields); asking nothing of records is asking no row (`Locks.rows` None)."""
        return Locks(rows=None if self == _NO_RECORDS else self, **rest)


_NO_RECORDS = Records()


def records_locked(locks: Locks) -> Records:
    """What `locks` asks of records (nothing, when it names none)."""
    rows = locks.rows
    if rows is None:
        return _NO_RECORDS
    assert isinstance(rows, Records)
    return rows


@dataclass(frozen=True)
class RecordsRead:
    """What a command's records give it to decide on (its `Current.rows`): `records` by
    the ident the command gave (exact or prefix); `first_writes`, each idempotency key
    it named -> the record as first written; `holders`, (label, value) -> the locked
    records carrying it that the caller may read, and `hidden_holders`, how many carry it
    in lanes the caller may not read."""

    records: Mapping[str, Record]
    first_writes: Mapping[str, Record] = field(default_factory=dict)
    holders: Mapping[tuple[str, str], tuple[Record, ...]] = field(default_factory=dict)
    hidden_holders: Mapping[tuple[str, str], int] = field(default_factory=dict)

    @property
    def by_id(self) -> Mapping[str, Record]:
        return {r.id: r for r in self.records.values()}

    def record(self, ident: str) -> Record:
        return self.records[ident]


class RecordLocks:
    """The record kind's row locks (`store.ledger.row_locks.RowLocks`)."""

    # Two calls raced on one idempotency key: the retry sees the winner's write.
    races = (IDEMPOTENCY_CONSTRAINT,)

    def statement(self, exclusive: bool) -> str:
        return LOCK_EXCLUSIVE if exclusive else LOCK_SHARED

    async def step(self, conn: Conn, agent: str, locks: Locks, policies: Policies) -> RecordStep:
        asked = records_locked(locks)
        exact = await _exact_ids(conn, agent, asked.ids, policies, asked.retired)
        carried = await _carried(conn, exact.values(), asked.carried_by_records)
        carrying = (*asked.carrying, *carried)
        holding = await _holders(conn, carrying)
        ids = set(exact.values()).union(*holding.values())
        return RecordStep(agent, asked, exact, ids, carried, carrying, holding)

    def named_only(self, locks: Locks) -> Sequence[str] | None:
        asked = records_locked(locks)
        return asked.ids if asked == Records(asked.ids) else None

    def written(self, rows: Mapping[str, Any]) -> RecordsRead:
        return RecordsRead(records=dict(rows))


async def _first_writes(conn: Conn, agent: str, keys: Sequence[str]) -> dict[str, Record]:
    """The records as first written by `agent` under its idempotency keys."""
    if not keys:
        return {}
    rows = await conn.fetch(FIRST_WRITES, agent, list(keys))
    return {row["idempotency_key"]: _record(row, state=row["state"]) for row in rows}


@dataclass(frozen=True)
class RecordStep:
    """The records one step of a command locks, and the values whose holders it locks."""

    agent: str
    asked: Records
    exact: Mapping[str, str]
    ids: set[str]
    carried: list[tuple[str, str]]
    carrying: tuple[tuple[str, str], ...]
    holding: Mapping[tuple[str, str], frozenset[str]]

    async def check(self, conn: Conn, locked: Sequence[asyncpg.Record]) -> None:
        # Whoever gains a value must lock one of its holders first (an adjustment
        # locks the record it adjusts), so once they are all locked the set holds.
        if self.carrying and await _holders(conn, self.carrying) != self.holding:
            raise HoldersMovedError()
        labels = self.asked.carried_by_records
        if labels and not _carries_only(locked, self.exact.values(), labels, set(self.carried)):
            raise HoldersMovedError()

    async def read(self, conn: Conn, txn: Txn, locked: Sequence[asyncpg.Record]) -> RecordsRead:
        records = _readable(txn, self.exact, locked, self.asked.retired, self.asked.engine)
        holders, hidden = _held(txn, self.holding, locked)
        return RecordsRead(
            records={**{r.id: r for rs in holders.values() for r in rs}, **records},
            first_writes=await _first_writes(conn, self.agent, self.asked.idempotency_keys),
            holders=holders,
            hidden_holders=hidden,
        )


async def _exact_ids(
    conn: Conn, agent: str, idents: Sequence[str], policies: Policies, retired: bool = False
) -> dict[str, str]:
    """Each ident's full id; prefixes resolve among the records the agent may read
    (and, for a command acting on retired records, among those too)."""
    cleaned = {ident: check_record_ident(ident) for ident in idents}
    prefixes = [c for c in cleaned.values() if len(c) < 35]
    if not prefixes:
        return cleaned
    in_force = await policies.current_version(conn)
    lanes = in_force.policy.agent(agent).readable_lanes(in_force.policy)
    full: dict[str, str] = {}
    statement = PREFIX_RETIRED_TOO if retired else PREFIX
    for prefix in prefixes:
        # Every id starting with the prefix sorts between it and it followed by 'g'.
        found = [r["id"] for r in await conn.fetch(statement, prefix, lanes, MAX_CANDIDATES + 1)]
        if not found:
            raise NotFoundError("record", prefix)
        if len(found) > 1:
            raise AmbiguousIdError(prefix, found[:MAX_CANDIDATES])
        full[prefix] = found[0]
    return {ident: full.get(c, c) for ident, c in cleaned.items()}


def _readable(
    txn: Txn,
    exact: Mapping[str, str],
    rows: Sequence[asyncpg.Record],
    retired: bool = False,
    engine: bool = False,
) -> dict[str, Record]:
    """The locked records by the caller's ident; one it may not read is not found, and
    a retired (or expired) one is refused (said so) unless the command acts on retired
    records. The engine reads every lane."""
    if not exact:
        return {}
    if engine:
        found = {row["id"]: _record(row) for row in rows}
    else:
        lanes = set(txn.agent.readable_lanes(txn.rules))
        found = {row["id"]: _record(row) for row in rows if RULE.may_read(row["lane"], lanes)}
    missing = [ident for ident, rid in exact.items() if rid not in found]
    if missing:
        raise NotFoundError("record", missing[0])
    if not retired:
        for ident, rid in exact.items():
            gone = found[rid].retirement_at(txn.at)
            if gone is not None:
                raise RetiredRecordError(ident, gone.at, gone.actor, gone.reason)
    return {ident: found[rid] for ident, rid in exact.items()}


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


async def _carried(
    conn: Conn, record_ids: Collection[str], labels: Sequence[str]
) -> list[tuple[str, str]]:
    """The values with `labels` that the records carry now (read before locking)."""
    if not labels or not record_ids:
        return []
    rows = await conn.fetch(CARRIED, list(record_ids), list(labels))
    return [(row["label"], row["value"]) for row in rows]


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
