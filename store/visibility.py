"""What a reader may see of an audit event's payload.

An event reaches a reader who may read its lane, but its payload may name or count
records of other lanes: the other end of a connection, the records an adjustment
links, a group's members. `readable_payload` is the one rule every way of reading
events applies (the `audit` queries, the live feed, its replay): a named record the
reader may not read disappears and a count counts only the records the reader may
read, exactly as if the hidden records did not exist. Payloads are stored whole; the
lanes they depend on are read beside the events (`read_named`), once for many readers.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from store.records import AuditEvent
from store.snapshot import Reader

# Per event kind, the payload keys holding one record id and those holding a list of
# record ids.
_RECORD_KEYS: Mapping[str, tuple[str, ...]] = {"connected": ("other",), "adjusted": ("adjustedBy",)}
_RECORD_LISTS: Mapping[str, tuple[str, ...]] = {"adjusted": ("adjusts",)}
# Per event kind, the payload key counting the members of the set the event joins; its
# members are the records given the same value in the same transaction.
_MEMBER_COUNTS: Mapping[str, str] = {"grouped": "members"}
_NAMING = {*_RECORD_KEYS, *_RECORD_LISTS, *_MEMBER_COUNTS}

# The lanes of the records named (by id) and of the members counted (by the counting
# event's seq), in one statement: both on primary or txid indexes.
_NAMED = """
SELECT r.id AS key, NULL::bigint AS seq, r.lane FROM records r WHERE r.id = ANY($1::text[])
UNION ALL
SELECT NULL, e.seq, m.lane FROM audit_events e
JOIN audit_events m
  ON m.txid = e.txid AND m.kind = e.kind AND m.payload->>'value' = e.payload->>'value'
WHERE e.seq = ANY($2::bigint[])
"""


@dataclass(frozen=True)
class Named:
    """The lanes a batch of events' payloads depend on: each named record's lane, and
    the lanes of the members each counting event counts (one lane per member)."""

    lanes: Mapping[str, str] = field(default_factory=dict)
    members: Mapping[int, Sequence[str]] = field(default_factory=dict)


NOTHING_NAMED = Named()


def names_records(event: AuditEvent) -> bool:
    """Whether the payload names or counts records (so it depends on the reader)."""
    return event.kind in _NAMING


async def read_named(db: Reader, events: Sequence[AuditEvent]) -> Named:
    """What `readable_payload` needs to know about `events`, in at most one statement."""
    naming = [e for e in events if e.kind in _NAMING]
    if not naming:
        return NOTHING_NAMED
    ids = sorted({i for e in naming for i in _named_ids(e)})
    counting = [e.seq for e in naming if e.kind in _MEMBER_COUNTS]
    lanes: dict[str, str] = {}
    members: dict[int, list[str]] = {}
    for row in await db.fetch(_NAMED, ids, counting):
        if row["seq"] is None:
            lanes[row["key"]] = row["lane"]
        else:
            members.setdefault(row["seq"], []).append(row["lane"])
    return Named(lanes, members)


def readable_payload(event: AuditEvent, readable: Container[str], named: Named) -> AuditEvent:
    """`event` as a reader of the lanes `readable` may see it: without the records of
    other lanes its payload names, counting only the records it may read. An event
    whose payload names no record is returned as it is."""
    if event.kind not in _NAMING:
        return event
    payload: dict[str, Any] = dict(event.payload)

    def seen(record_id: object) -> bool:
        lane = named.lanes.get(record_id) if isinstance(record_id, str) else None
        return lane is not None and lane in readable

    for key in _RECORD_KEYS.get(event.kind, ()):
        if key in payload and not seen(payload[key]):
            del payload[key]
    for key in _RECORD_LISTS.get(event.kind, ()):
        if isinstance(payload.get(key), list):
            payload[key] = [i for i in payload[key] if seen(i)]
    count = _MEMBER_COUNTS.get(event.kind)
    if count is not None and count in payload:
        payload[count] = sum(lane in readable for lane in named.members.get(event.seq, ()))
    if payload == event.payload:
        return event
    return replace(event, payload=payload)


def _named_ids(event: AuditEvent) -> list[str]:
    found = [event.payload.get(key) for key in _RECORD_KEYS.get(event.kind, ())]
    for key in _RECORD_LISTS.get(event.kind, ()):
        listed = event.payload.get(key)
        if isinstance(listed, list):
            found.extend(listed)
    return [i for i in found if isinstance(i, str)]
