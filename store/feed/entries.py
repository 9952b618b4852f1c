"""One write, one change per record: the events of one record entry told once.

A write may report one version of a record with several events: an `ingest` with
`adjusts` writes `sr_ingested` and `adjusted` for the new record's version 1, and one
`ingestMany` adjusting a record twice writes two `adjusted` for its next version. A
subscriber that tells what happened to records (`watch`) tells each version once. The
events of one entry are appended together, one after the other, so the entry of the last
event told is all it needs to remember; a resume starts from the entry of the event at
its cursor, which was told then.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from store import tables as t
from store.ids import RECORD_KIND
from store.ledger.audit import AuditEvent
from store.reads import lane_floor

Entry = tuple[str, int | None]
"""A record entry: the record's id and the version the entry wrote."""


@dataclass
class Entries:
    """The record entry of the last event seen, to tell apart the first event of an entry
    from the others of it."""

    last: Entry | None = None

    def first(self, event: AuditEvent) -> bool:
        """Whether `event` is the first of its record entry (any event of another kind is)."""
        if event.object_kind != RECORD_KIND or event.record_id is None:
            return True
        entry = (event.record_id, event.version_after)
        if entry == self.last:
            return False
        self.last = entry
        return True


async def entry_at(engine: AsyncEngine, position: int) -> Entry | None:
    """The record entry of the event at feed `position` (None: none, or another kind's)."""
    ev = t.audit_events
    async with engine.connect() as conn:
        # A position names an event of any lane: the gateway's own check.
        await lane_floor.on_core(conn, lane_floor.CROSSING)
        row = (
            await conn.execute(
                select(ev.c.record_id, ev.c.version_after).where(
                    ev.c.seq == position, ev.c.object_kind == RECORD_KIND
                )
            )
        ).first()
    return None if row is None or row[0] is None else (row[0], row[1])
