"""What a feed subscriber works on: the records on an edge (`match`), or given records.

An event is about a record when it names one (`record_id`); it is on a gather when that
record was a member of the gather in the version before the change or in the version
after it, so a subscriber sees a record join the gather, change on it, and leave it. For
an event reporting an object attached to the record (a correction, and each kind to come)
the record is unchanged: before and after are the record as it was when the event was
written. An event is about given records when its `record_id` is one of them or its
payload names one (a top-level value, or an element of a top-level list, holding a record
id): connections, groups, chains and corrections report on both ends, and so will any kind
whose payload names the records it joins.

Each rule is written twice, once in Python for events already read (the live feed) and
once as SQL for the replay from the table, side by side, the way `store.reads.visibility`
writes its rule; the replay reads only the events of the records concerned (by index),
never the whole feed after the cursor.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policies.properties import Property, property_of
from store.ids import RECORD_KIND
from store.kinds.record.queries import bind_properties, carries_any, gather_properties, on_gather
from store.ledger.audit import AuditEvent
from store.reads.snapshot import Reader
from store.reads.statements import Params
from store.reads.visibility import CORE_LANES, RULE
from store.tables import named_ids, names_records

RECORD_ID_START = "sr_"


class Change(enum.Enum):
    """How an event moves its record relative to a gather."""

    JOINED = "JOINED"
    LEFT = "LEFT"
    CHANGED = "CHANGED"


@dataclass(frozen=True)
class Membership:
    """One interval in which a record carried an edge property (`edge_properties`)."""

    label: str
    value: str
    from_version: int
    to_version: int | None
    recorded_from: datetime
    recorded_to: datetime | None

    def held(self, event: AuditEvent, version: int | None) -> bool:
        """Whether the record carried it in `version` of the record (a record event), or
        when `event` was written (an event of an object attached to the record)."""
        if event.object_kind == RECORD_KIND:
            if version is None:
                return False
            return self.from_version <= version and (
                self.to_version is None or self.to_version > version
            )
        return RULE.was_held(self.recorded_from, self.recorded_to, event.at)


Memberships = Mapping[str, Sequence[Membership]]
"""The memberships of a batch's records, by record id."""


@dataclass(frozen=True)
class Carried:
    """The edge properties an event's record carried before the change and after it (see
    `Membership.held`), worked out once per event for every filter that looks."""

    before: frozenset[Property] = frozenset()
    after: frozenset[Property] = frozenset()

    @classmethod
    def of(cls, event: AuditEvent, held: Sequence[Membership]) -> Carried:
        if not held or event.record_id is None:
            return NOTHING_CARRIED
        return cls(
            frozenset(
                property_of(m.label, m.value) for m in held if m.held(event, event.version_before)
            ),
            frozenset(
                property_of(m.label, m.value) for m in held if m.held(event, event.version_after)
            ),
        )


NOTHING_CARRIED = Carried()


def payload_ids(payload: Mapping[str, Any]) -> set[str]:
    """The record ids a payload names (the Python side of `NAMED_IDS`)."""
    found: set[str] = set()
    for value in payload.values():
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, str) and item.startswith(RECORD_ID_START):
                found.add(item)
    return found


@dataclass(frozen=True)
class FeedFilter:
    """The records a subscription is about; equal filters share one group.

    `match` None: no gather filter; a tuple (possibly empty, when every label asked for
    is hidden, so nothing matches): the gather's edge properties. `record_ids` None: no
    record filter.
    """

    match: tuple[Property, ...] | None = None
    union: bool = False
    record_ids: frozenset[str] | None = None
    # The agents whose events are wanted (None: every agent's).
    actors: frozenset[str] | None = None

    @classmethod
    def of(
        cls,
        match: Sequence[str] | None,
        union: bool,
        record_ids: Sequence[str] | None,
        actors: Sequence[str] | None = None,
    ) -> FeedFilter:
        """The filter of a subscription's arguments (`record_ids` already resolved)."""
        props = None if match is None else tuple(gather_properties(match))
        ids = None if record_ids is None else frozenset(record_ids)
        who = None if actors is None else frozenset(actors)
        return cls(props, union and props is not None, ids, who)

    @property
    def everything(self) -> bool:
        return self.about_records is False and self.actors is None

    @property
    def about_records(self) -> bool:
        """Whether it follows records (`match`, `record_ids`): its replay reads by record."""
        return self.match is not None or self.record_ids is not None

    @property
    def needs_memberships(self) -> bool:
        """Whether deciding needs the memberships of each event's record."""
        return self.match is not None

    # -- Python, for events already read ------------------------------------

    def member(self, carried: frozenset[Property]) -> bool:
        """Whether a record carrying `carried` is on the gather."""
        if not self.match:
            return False
        if self.union:
            return not carried.isdisjoint(self.match)
        return carried.issuperset(self.match)

    def change(self, carried: Carried) -> Change | None:
        """How an event whose record carried `carried` moves the record relative to the
        gather (None: off it throughout)."""
        before = self.member(carried.before)
        after = self.member(carried.after)
        if before and after:
            return Change.CHANGED
        if after:
            return Change.JOINED
        if before:
            return Change.LEFT
        return None

    def admits(self, event: AuditEvent, carried: Carried) -> bool:
        """Whether a subscriber with this filter wants `event` (as its reader sees it:
        a record hidden from the reader in a payload does not make it wanted)."""
        if self.actors is not None and event.actor not in self.actors:
            return False
        if self.match is not None and self.change(carried) is None:
            return False
        return self.record_ids is None or self.names(event)

    def names(self, event: AuditEvent) -> bool:
        """Whether the event is about one of `record_ids`."""
        ids = self.record_ids or frozenset()
        return event.record_id in ids or not ids.isdisjoint(payload_ids(event.payload))

    # -- SQL, for the replay ------------------------------------------------

    def sql(self, e: str, lanes: str) -> FilterSql:
        """This filter as SQL over the events aliased `e` (binds the gather's properties
        as a gather binds them, after `fp_`, and `:record_ids`, given by `FilterSql.values`)."""
        values: dict[str, Any] = {}
        bind_properties(values, _FP, self.match or ())
        p = _Named()
        conditions: list[str] = []
        candidates: list[str] = []
        if self.actors is not None:
            values["actors"] = sorted(self.actors)
            conditions.append(f"{e}.actor = ANY(CAST(:actors AS text[]))")
        if self.match is not None:
            count = len(self.match)

            def at(version: str) -> str:
                return on_gather(
                    p, f"{e}.record_id", count, self.union, lambda m: _held_sql(m, e, version)
                )

            conditions.append(
                f"({at('version_before')} OR {at('version_after')})" if count else "false"
            )
            # Every record ever on the gather carried its first property (INTERSECT) or
            # one of them (UNION) at some time: found on the membership history's index.
            props = range(count) if self.union else range(min(1, count))
            candidates.append(
                f"SELECT DISTINCT c.record_id AS id FROM edge_properties c "
                f"WHERE {RULE.lane('c', lanes)} AND ({carries_any(p, 'c', props)})"
            )
        named = None
        if self.record_ids is not None:
            values["record_ids"] = sorted(self.record_ids)
            candidates.append("SELECT unnest(CAST(:record_ids AS text[])) AS id")
            named = (
                f"{named_ids(f'{e}.payload')} ?| CAST(:record_ids AS text[]) "
                f"AND {names_records(f'{e}.payload')}"
            )
        # With both filters, a candidate must be on the gather and be one of the ids.
        source = " INTERSECT ".join(f"({c})" for c in candidates)
        return FilterSql(source, " AND ".join(conditions) or "true", named, values)


_FP = "fp_"


class _Named(Params):
    """The names `FeedFilter.sql` binds, as the replay's text statement names them."""

    def __call__(self, name: str, cast: str | None = None) -> str:
        named = f":{_FP}{name}"
        return f"CAST({named} AS {cast})" if cast else named


def _held_sql(m: str, e: str, version: str) -> str:
    """SQL: `Membership.held`."""
    return f"""(CASE WHEN {e}.object_kind = 'record'
        THEN {m}.from_version <= {e}.{version}
             AND ({m}.to_version IS NULL OR {m}.to_version > {e}.{version})
        ELSE {RULE.held(m, f"{e}.at")} END)"""


@dataclass(frozen=True)
class FilterSql:
    """A filter as SQL: `candidates` selects the ids (`id`) of the records concerned,
    `condition` is what an event of one of them must meet, and `named` (with record ids)
    finds the events naming them in their payloads."""

    candidates: str
    condition: str
    named: str | None
    values: Mapping[str, Any] = field(default_factory=dict)


_MEMBERSHIPS = """
SELECT record_id, label, value, from_version, to_version, recorded_from, recorded_to
FROM edge_properties WHERE record_id = ANY($1::text[])
"""


async def memberships(db: Reader, events: Sequence[AuditEvent]) -> Memberships:
    """Every membership, past and present, of the events' records, in one statement
    (on `ix_edge_properties_record_id`; none when no event names a record)."""
    ids = sorted({e.record_id for e in events if e.record_id is not None})
    if not ids:
        return {}
    found: dict[str, list[Membership]] = {}
    for row in await db.fetch(_MEMBERSHIPS, ids):
        found.setdefault(row["record_id"], []).append(
            Membership(
                row["label"],
                row["value"],
                row["from_version"],
                row["to_version"],
                row["recorded_from"],
                row["recorded_to"],
            )
        )
    return found


def replay_text(f: FeedFilter, columns: str, common: str) -> str:
    """SQL: the first `:page` events meeting `common` (the replay's position, snapshot,
    lanes and kinds, over `e`) and the filter `f` (one that follows records), in seq
    order.

    Each record concerned is read on its own (`ix_audit_events_record_id_seq`, its
    events after the cursor in order, at most a page), and the events naming the given
    records in their payloads on the index of migration 0014, so that a replay costs
    what the records concerned hold, not the feed after the cursor. Every condition is
    inside each branch: a branch's page is the first of its events the replay wants.
    """
    fs = f.sql("e", CORE_LANES)
    branches = [
        f"""SELECT r.* FROM candidates c CROSS JOIN LATERAL (
            SELECT {columns} FROM audit_events e
            WHERE e.record_id = c.id AND {common} AND {fs.condition}
            ORDER BY e.seq LIMIT :page) r"""
    ]
    if fs.named is not None:
        branches.append(
            f"""(SELECT {columns} FROM audit_events e
            WHERE {fs.named} AND {common} AND {fs.condition}
            ORDER BY e.seq LIMIT :page)"""
        )
    union = " UNION ".join(branches)
    return f"""WITH candidates AS MATERIALIZED ({fs.candidates})
SELECT u.* FROM ({union}) u ORDER BY u.seq LIMIT :page"""
