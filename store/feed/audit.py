"""The audit trail's reads: events in feed order, filtered to the lanes the caller may read
(their payloads too: `store.reads.visibility`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from store.errors import InvalidIdError, InvalidInputError
from store.ids import EVENT_ID
from store.ledger.audit import AuditEvent
from store.ledger.events import check_kinds
from store.reads.pages import Page, page_size, position_cursor
from store.reads.snapshot import Reader
from store.reads.statements import Params, Statement
from store.reads.visibility import RULE, read_named, readable_payload

EVENT_COLUMNS = (
    "e.seq, e.id, e.kind, e.record_id, e.lane, e.actor, e.at, e.payload, e.version_before, "
    "e.version_after, e.object_kind"
)


@functools.cache
def _audit_statement(record: bool, kinds: bool, after: bool, newest: bool) -> Statement:
    p = Params()
    # Events with no lane (policy changes) concern everyone.
    where = RULE.event("e", p("lanes", "text[]"))
    if record:
        where += f" AND e.record_id = {p('record_id')}"
    if kinds:
        where += f" AND e.kind = ANY({p('kinds', 'text[]')})"
    keyed = f"AND e.seq > {p('after')}" if after else ""
    return p.statement(
        f"""SELECT c.total, q.* FROM (SELECT count(*) AS total FROM audit_events e WHERE {where}) c
        LEFT JOIN LATERAL (
          SELECT {EVENT_COLUMNS} FROM audit_events e WHERE {where} {keyed}
          ORDER BY e.seq {"DESC" if newest else ""} LIMIT {p("limit")}
        ) q ON true"""
    )


async def audit(
    db: Reader,
    lanes: Sequence[str],
    record_id: str | None,
    kinds: Sequence[str] | None,
    first: int | None,
    after: str | None,
    last: int | None = None,
) -> Page[AuditEvent]:
    """Audit events in feed order (newest last), with their total count, in one statement;
    with `last`, the newest `last` of them (still oldest first), where nothing follows."""
    if first is not None and last is not None:
        raise InvalidInputError(
            "pass first (the oldest events) or last (the newest), not both",
            allowed=["first", "last"],
        )
    size = page_size(first if last is None else last)
    if kinds is not None:
        kinds = check_kinds(kinds)
    values: dict[str, Any] = {
        "lanes": list(lanes),
        "record_id": record_id,
        "kinds": list(kinds or []),
        "after": None if after is None else position_cursor(after),
        "limit": size + (last is None),
    }
    statement = _audit_statement(
        record_id is not None, bool(kinds), after is not None, last is not None
    )
    rows = await db.fetch(statement.text, *statement.args(values))
    events = [AuditEvent.from_row(row) for row in rows if row["seq"] is not None]
    if last is not None:
        events.sort(key=lambda e: e.seq)
    has_next = len(events) > size
    events = await _as_read(db, events[:size], lanes)
    return Page(events, rows[0]["total"], has_next, str(events[-1].seq) if events else None)


_AUDIT_EVENT = f"""
SELECT {EVENT_COLUMNS} FROM audit_events e
WHERE e.id = $1 AND {RULE.event("e", "$2::text[]")}
"""


async def audit_event(db: Reader, event_id: str, lanes: Sequence[str]) -> AuditEvent | None:
    """The event, if the caller may read it; an id of another shape is refused, not missed."""
    if not EVENT_ID.fullmatch(event_id):
        raise InvalidIdError(event_id, "'ae_' followed by 32 hex characters, as `audit` gives")
    row = await db.fetchrow(_AUDIT_EVENT, event_id, list(lanes))
    if row is None:
        return None
    [event] = await _as_read(db, [AuditEvent.from_row(row)], lanes)
    return event


async def _as_read(
    db: Reader, events: Sequence[AuditEvent], lanes: Sequence[str]
) -> list[AuditEvent]:
    """The events' payloads as the reader of `lanes` may see them (`store.reads.visibility`)."""
    named = await read_named(db, events)
    readable = frozenset(lanes)
    return [readable_payload(e, readable, named) for e in events]
