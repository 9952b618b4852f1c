"""Where the stored audit events differ from what their ledger entries imply.

Audit events are not hashed: an owner could edit one (its actor, time, kind, lane or
payload) and the chains would still hold. But every event is a report of the entry it
sits beside, written from that entry, the object's previous entry and the command that
wrote them; so `verify` and `import` recompute the events from the entries and compare
every column and payload field with the stored ones.

Most of a payload follows from the entry and the object's previous entry. A few fields
name other objects of the same command (records an asserted edge joins); they are checked
against the entries of those objects once every entry has been read, by the kind's
`Links`. Entries of hash format 1 were written before these payloads took their shape;
their events are checked on every column but the payload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from store.ledger.entry import Entry
from store.ledger.implied import Implied, Links, Problem, Shared, differs
from store.ledger.registry import kind_of, kinds
from store.pool import Conn
from store.reads.visibility import OTHER_LANE

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The events of each entry, as verify reads them: the columns an event shares with its
# entry, by (object_kind, object_id, version_after), in feed order.
_ENTRY_EVENTS = """
(SELECT coalesce(jsonb_agg(jsonb_build_object(
   'seq', e.seq, 'kind', e.kind, 'record_id', e.record_id, 'lane', e.lane,
   'actor', e.actor, 'at_us', (extract(epoch FROM e.at) * 1000000)::bigint,
   'payload', e.payload, 'version_before', e.version_before) ORDER BY e.seq), '[]'::jsonb)
 FROM audit_events e
 WHERE e.object_kind = l.kind AND e.object_id = l.object_id AND e.version_after = l.version)
"""


def _implied(
    before: Mapping[str, Any] | None, entry: Entry, links: Links
) -> tuple[Shared, list[Implied]] | str:
    """The events `entry` implies, or why none can be said."""
    kind = kind_of(entry.kind)
    if kind is None:
        return f"no audit event rule for ledger kind '{entry.kind}'"
    return kind.implied(before, entry, links)


def check_entry(
    before: Mapping[str, Any] | None,
    entry: Entry,
    hash_format: int,
    events: Sequence[Mapping[str, Any]],
    links: Links,
    erased_by: str | None = None,
) -> list[Problem]:
    """Compare the stored `events` of `entry` (columns as `_ENTRY_EVENTS` reads them)
    with what the entry implies; `before` is the object's previous state."""
    implied = _implied(before, entry, links)

    def problem(seq: int | None, text: str) -> Problem:
        return Problem(seq, entry.kind, entry.object_id, entry.version, text)

    if not events:
        # An entry without any event is reported by the check that every entry has one.
        return []
    if isinstance(implied, str):
        return [problem(None, implied)]
    shared, wanted = implied
    found: list[Problem] = []
    expected_at = (entry.at - _EPOCH) // timedelta(microseconds=1)
    for event in events:
        seq = event["seq"]
        for name, stored, value in (
            ("actor", event["actor"], entry.actor),
            ("record_id", event["record_id"], shared.record_id),
            ("lane", event["lane"], shared.lane),
            ("version_before", event["version_before"], shared.version_before),
        ):
            if stored != value:
                found.append(problem(seq, f"{name} is {stored!r}; the entry's is {value!r}"))
        if event["at_us"] != expected_at:
            at = _EPOCH + timedelta(microseconds=event["at_us"])
            found.append(
                problem(seq, f"at is {at.isoformat()}; the entry's is {entry.at.isoformat()}")
            )
    if erased_by is not None:
        # An erased entry's events keep every column but their payload, which names the
        # erasure (and the second lane the event concerns, as its entry implies it: the
        # feed's visibility rule reads it); what they said of the content is gone with it.
        lanes = (
            set() if isinstance(implied, str) else {w.payload.get(OTHER_LANE) for w in implied[1]}
        )
        for event in events:
            erased: dict[str, Any] = {"erased": erased_by}
            other = event["payload"].get(OTHER_LANE)
            if other is not None and other in lanes:
                erased[OTHER_LANE] = other
            if event["payload"] != erased:
                found.append(
                    problem(event["seq"], f"payload is not {erased} though its entry was erased")
                )
        return found
    # Kinds and payloads, paired in feed order (an entry's events are written in order).
    left = list(events)
    for want in wanted:
        match = next((e for e in left if e["kind"] == want.kind), None)
        if match is None:
            found.append(
                problem(None, f"the entry implies a '{want.kind}' event the audit events lack")
            )
            continue
        left.remove(match)
        if hash_format == 1:
            continue
        payload = match["payload"]
        linked = want.linked
        own = {k: v for k, v in payload.items() if k not in linked}
        if own != want.payload or not all(k in payload for k in linked):
            found.append(problem(match["seq"], _payload_difference(payload, want.payload, linked)))
        elif linked:
            links.waiting.append((problem(match["seq"], ""), linked, dict(payload)))
    for extra in left:
        found.append(
            problem(
                extra["seq"],
                f"kind is '{extra['kind']}', which the entry does not imply "
                f"(it implies {[w.kind for w in wanted]})",
            )
        )
    return found


def _payload_difference(
    stored: Mapping[str, Any], wanted: Mapping[str, Any], linked: Sequence[str]
) -> str:
    for name in sorted(wanted.keys() | stored.keys() | set(linked)):
        if name in linked:
            if name not in stored:
                return f"payload field '{name}' is missing"
        elif name not in wanted:
            return f"payload field '{name}' is {stored[name]!r}; the entry implies none"
        elif stored.get(name) != wanted[name]:
            return differs(name, stored.get(name), wanted[name], "entry implies")
    return "payload differs from what the entry implies"


def check_object(rows: Sequence[Mapping[str, Any]], links: Mapping[str, Links]) -> list[Problem]:
    """Check the events of one object's entries (ledger rows with their `events`, in
    version order); `links`: each kind's."""
    own = links.get(rows[0]["kind"], Links()) if rows else Links()
    found: list[Problem] = []
    before: Mapping[str, Any] | None = None
    for row in rows:
        entry = Entry.from_row(row)
        found.extend(
            check_entry(before, entry, row["hash_format"], row["events"], own, row["erased_by"])
        )
        before = entry.state
    kind = kind_of(rows[0]["kind"]) if rows else None
    if kind is not None and before is not None:
        kind.saw_last(before, rows[-1]["object_id"], own)
    return found


_LEDGER_EVENTS = f"""
SELECT l.kind, l.object_id, l.version, l.event, l.actor, l.at, l.policy_version, l.state,
       l.prev_hash, l.hash, l.hash_format, l.state_sha256, l.erased_by,
       {_ENTRY_EVENTS} AS events
FROM ledger l ORDER BY l.kind, l.object_id, l.version
"""


_ENTRIES_WITHOUT_EVENTS = """
SELECT l.kind, l.object_id, l.version FROM ledger l
WHERE NOT EXISTS (SELECT 1 FROM audit_events e WHERE e.object_kind = l.kind
                  AND e.object_id = l.object_id AND e.version_after = l.version)
ORDER BY l.seq LIMIT 50
"""
_EVENTS_WITHOUT_ENTRIES = """
SELECT e.seq, e.id, e.object_kind, e.object_id, e.version_after FROM audit_events e
WHERE NOT EXISTS (SELECT 1 FROM ledger l WHERE l.kind = e.object_kind
                  AND l.object_id = e.object_id AND l.version = e.version_after)
ORDER BY e.seq LIMIT 50
"""


async def event_problems(conn: Conn) -> list[Problem]:
    """Every entry has the events that report it, no event lacks its entry, and every
    event says what its entry implies; read in the caller's transaction."""
    found = [
        Problem(None, kind, object_id, version, f"{kind} entry has no audit event")
        for kind, object_id, version in await conn.fetch(_ENTRIES_WITHOUT_EVENTS)
    ]
    for seq, event_id, kind, object_id, version in await conn.fetch(_EVENTS_WITHOUT_ENTRIES):
        text = f"audit event {event_id} reports a {kind} entry the ledger does not hold"
        found.append(Problem(None, kind, object_id, version, text, event=seq))
    links = {kind.name: kind.links() for kind in kinds()}
    rows: list[Any] = []
    async for row in conn.cursor(_LEDGER_EVENTS, prefetch=2000):
        if rows and (rows[0]["kind"], rows[0]["object_id"]) != (row["kind"], row["object_id"]):
            found.extend(check_object(rows, links))
            rows = []
        rows.append(row)
    found.extend(check_object(rows, links))
    for own in links.values():
        found.extend(own.problems())
    return found
