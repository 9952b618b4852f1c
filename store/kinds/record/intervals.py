"""A record's history cut into intervals in which one part of it stayed the same: the
rows of the words index and of the vectors index are such intervals.

The rule is pure and one for both: `held(record)` is what an interval keeps (None: the
version holds no interval, as a retired record or one without a vector); a version whose
`held` differs from its predecessor's closes the interval open before it and opens one.
The write path runs it on each new version, and `verify` and import over the replayed
ledger, so the rows they write agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from store.kinds.record.model import Record
from store.ledger.registry import Rows
from store.ledger.report import Report
from store.pool import Conn

Held = Callable[[Record], object | None]


@dataclass(frozen=True)
class Interval:
    """One row of an interval table without what it indexes (the version gives that)."""

    record_id: str
    from_version: int
    lane: str
    source_type: str
    recorded_from: datetime
    recorded_to: datetime | None = None


def opens(held: Held, before: Record | None, after: Record) -> tuple[bool, bool]:
    """Whether the version `after` closes the interval `before` held, and opens one."""
    was = None if before is None else held(before)
    now = held(after)
    if was is not None and now is not None and was == now:
        return (False, False)
    return (was is not None, now is not None)


def intervals(held: Held, versions: Iterable[Record]) -> list[Interval]:
    """A record's intervals over its versions, oldest first (verify, import, migration)."""
    found: list[Interval] = []
    before: Record | None = None
    for record in versions:
        close, open_ = opens(held, before, record)
        if close:
            last = found[-1]
            found[-1] = Interval(**{**last.__dict__, "recorded_to": record.updated_at})
        if open_:
            found.append(
                Interval(
                    record.id,
                    record.version,
                    record.lane,
                    record.state.source_type,
                    record.updated_at,
                )
            )
        before = record
    return found


class Writer:
    """The write path's rows of one interval table for one command: an interval opened
    and closed within the command is written closed (the statement's parts cannot see
    each other's rows). `extra(record)` adds what the row indexes to its columns."""

    def __init__(
        self, held: Held, closed: str, opened: str, extra: Callable[[Record], dict[str, Any]]
    ) -> None:
        self.held, self.closed, self.opened_part, self.extra = held, closed, opened, extra
        self.opened: dict[str, dict[str, Any]] = {}

    def add(self, before: Record | None, after: Record, rows: Rows) -> None:
        close, open_ = opens(self.held, before, after)
        if close:
            pending = self.opened.pop(after.id, None)
            if pending is not None:
                pending["recorded_to"] = after.updated_at
            else:
                rows.part(self.closed).append({"record_id": after.id, "at": after.updated_at})
        if open_:
            row = {
                "record_id": after.id,
                "from_version": after.version,
                "lane": after.lane,
                "source_type": after.state.source_type,
                "recorded_from": after.updated_at,
                "recorded_to": None,
                **self.extra(after),
            }
            rows.part(self.opened_part).append(row)
            self.opened[after.id] = row


# Rows written a statement at a time by import, the migrations and verify's rebuild.
_BATCH = 2000
_COLUMNS = tuple(f.name for f in fields(Interval))


async def insert(conn: Conn, statement: str, rows: Sequence[Interval]) -> None:
    """Write `rows` in batches with `statement`, which takes one array per column of an
    interval and computes what it indexes from the ledger."""
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        await conn.execute(statement, *([getattr(r, c) for r in batch] for c in _COLUMNS))


async def compare(
    conn: Conn,
    expected: Iterable[Interval],
    report: Report,
    sql: tuple[str, str],
    what: str,
    stale: str,
) -> None:
    """verify: the live intervals (`sql[0]`) against the replayed ones, and the rows whose
    indexed `what` is not their version's (`sql[1]`), reported as `stale`."""
    live_sql, stale_sql = sql
    want = set(expected)
    live: set[Interval] = set()
    async for row in conn.cursor(live_sql, prefetch=5000):
        live.add(Interval(**dict(row)))
    for found in sorted(want - live, key=_key)[:50]:
        report.problems.append(
            f"{found.record_id}: {what} of version {found.from_version} missing from the index"
        )
    for found in sorted(live - want, key=_key)[:50]:
        report.problems.append(
            f"{found.record_id}: {what} of version {found.from_version} indexed, "
            "the ledger has no such interval"
        )
    for row in await conn.fetch(stale_sql):
        report.problems.append(
            f"{row['record_id']}: {what} of version {row['from_version']} {stale}"
        )


def _key(row: Interval) -> tuple[str, int]:
    return (row.record_id, row.from_version)
