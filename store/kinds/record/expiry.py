"""Expiry: a record treated as retired from an instant on, and the tombstones written after.

A record's state may hold when it expires (`RecordState.expires_at`: `expiresAt` on
ingest, ingestMany and update, or its lane's `ttl`). From that instant every read treats
it as retired (the visibility rule compares the instant, `store.reads.visibility`), and
every count leaves it out (`store.kinds.record.counts`), whether or not its tombstone is
written yet. The gateway then writes the tombstone through the one write path
(`ExpireRecords`, run by `sweep`): a retirement by the engine (actor `edgeloom`, reason
`expired`) in the ledger and the audit feed, which moves the projections and the counts
as any retirement does, so subscribers hear of it. Restoring the record, or an update
with a later `expiresAt`, extends it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from store.kinds.record.locks import Records, RecordsRead
from store.kinds.record.model import (
    EXPIRY_ACTOR,
    EXPIRY_REASON,
    Record,
    Retired,
    next_version,
)
from store.kinds.record.retire import retired_with
from store.ledger.command import Current, Event, Locks, Plan, Txn, Write
from store.ledger.registry import kinds
from store.reads import lane_floor
from store.reads.visibility import NOW, RULE

if TYPE_CHECKING:
    from store.ledger.executor import Executor
    from store.pool import Pool

# Tombstones written by one command: each locks its records and their typed edges.
BATCH = 100

# The records due now whose tombstone is not written yet, oldest expiry first, and the
# instant they are due by (`ix_records_expiring`).
DUE = f"""
SELECT {NOW} AS now, array(
  SELECT id FROM records x_ WHERE x_.{RULE.retired} IS NULL AND x_.{RULE.expiry} <= {NOW}
  ORDER BY x_.{RULE.expiry}, x_.id LIMIT $1) AS ids
"""


@dataclass(frozen=True)
class ExpireRecords:
    """Write the tombstones of the records among `record_ids` expired by `by` (the
    instant their reads compared with): each an `sr_retired` version by the engine,
    reason `expired`, with what is attached to it retired too. A record retired since,
    restored, or given a later expiry meanwhile is left as it is."""

    record_ids: tuple[str, ...]
    by: datetime

    def locks(self) -> Locks:
        attached = tuple(kind.name for kind in kinds())
        return Records(self.record_ids, retired=True, engine=True).locks(attached=attached)

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[list[str]]:
        due = [r for r in map(current.rows.record, self.record_ids) if _due(r, self.by)]
        writes: list[Write] = []
        for record in due:
            state = replace(record.state, retired=Retired(EXPIRY_REASON))
            event = Event("sr_retired", {"reason": EXPIRY_REASON})
            writes.append(next_version(record, state, "sr_retired", [event]))
        writes += retired_with(txn, current, {r.id for r in due})
        ids = [r.id for r in due]
        return Plan(writes, lambda _: ids)


def _due(record: Record, by: datetime) -> bool:
    return record.state.retired is None and record.state.expired(by)


async def sweep(pool: Pool, executor: Executor, batch: int = BATCH) -> list[str]:
    """Write the tombstones of every record expired now and not retired yet, `batch` a
    command; the ids retired."""
    done: list[str] = []
    while True:
        # Records of every lane: the gateway's own work, as the crossing role.
        async with pool.acquire() as conn, lane_floor.crossing(conn):
            row = await conn.fetchrow(DUE, batch)
        assert row is not None
        ids = tuple(row["ids"])
        if not ids:
            return done
        command = ExpireRecords(ids, row["now"])
        retired = await executor.execute(EXPIRY_ACTOR, command, lane_floor.CROSSING)
        done += retired
        if len(ids) < batch or not retired:
            return done
