"""What a caller may see at time T: the one rule every read takes its predicate from.

A row is visible to a caller when its lane is one the caller may read (events with no
lane concern everyone), when it held at T (a membership interval open at T; a correction
made by T), when it is not retired at T (records: a retired record is absent from every
current read and present, as it was, in every read at an earlier instant), and, for a
typed edge, when the caller may read both records it joins, neither is retired at T, and
it is valid at T. The engine's hidden labels are never listed as the caller's own or as
hyperedges, and its metadata labels (facts about one record: a file's size, a section's
offset) are no edge property at all: a record holds no membership for them, so nothing
walks, gathers, counts or lists them; a record's `metadata` shows them. `Rule` writes
each condition once, as SQL text with the row's alias and the placeholders of the
caller's dialect: `$n` for the fixed-text statements and the compiled path
(`store.reads.statements`), `CAST(:name AS type)` for SQLAlchemy Core (`core`), so the
texts stay fixed per shape and every dialect reads the same predicate.

An event reaches a reader who may read its lane (and, for an event whose payload names
the lane of a second record it concerns, `toLane` of a typed edge's events, that lane
too), but its payload may name or count
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
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from sqlalchemy import TextClause, text

from policies.properties import METADATA_PREFIX, RESERVED_PREFIX
from store.ids import ADJUSTMENT

if TYPE_CHECKING:
    from datetime import datetime

    from policies.properties import Property
    from store.reads.snapshot import Reader

# The payload key of an event naming the lane of the second record it concerns (the to
# record of a typed edge): the event is read only by a reader of both lanes.
OTHER_LANE = "toLane"

# The caller's lanes and the instant T as SQLAlchemy Core binds them (`core`).
CORE_LANES = "CAST(:lanes AS text[])"
CORE_AT = "CAST(:as_of AS timestamptz)"
# The instant current reads compare expiries with (migration 0030: `now()`, replaceable
# by a test that moves the clock).
NOW = "edgeloom_now()"

P = TypeVar("P", bound="Property")
D = TypeVar("D", bound="datetime")


def _col(t: str, name: str) -> str:
    return f"{t}.{name}" if t else name


@dataclass(frozen=True)
class EdgeValidity:
    """The columns of a typed edge's validity: valid from, valid until (NULL: still
    valid), and when it was recorded."""

    valid_at: str = "valid_at"
    invalid_at: str = "invalid_at"
    recorded_at: str = "created_at"


@dataclass(frozen=True)
class Rule:
    """What a caller may see at time T, as SQL over a row aliased `t` ("" for an
    unqualified table); `lanes` is the array of lanes the caller may read and `at`
    the instant T (None: now), both as placeholders of the statement's dialect.

    `retired` names the records' column of when a record was retired (None: records
    cannot be retired), and `tombstone` the key a retired record's ledger state holds:
    every current read leaves a retired record out, and every earlier read shows it as
    it was. A record's memberships close when it is retired (the projection rule), so
    reads of memberships need no slot of their own for that.

    `expiry` names both the records' column and the state's key of the instant a record
    expires: from it on the record is treated as retired by every read, before the
    gateway writes its tombstone (`store.kinds.record.expiry`). Until then its
    memberships are still open, so reads of memberships leave out those of a record
    expired at T (`unexpired`: a probe of the few pending expiries now, of the records
    that ever expired at an earlier T). Now is `edgeloom_now()` (migration 0030).
    """

    hidden_labels: tuple[str, ...] = (ADJUSTMENT,)
    engine_prefix: str = RESERVED_PREFIX
    metadata_prefix: str = METADATA_PREFIX
    retired: str | None = "retired_at"
    tombstone: str = "retired"
    expiry: str = "expires_at"
    edge_validity: EdgeValidity = field(default_factory=EdgeValidity)

    # -- lanes ------------------------------------------------------------------

    def lane(self, t: str, lanes: str) -> str:
        """SQL: the row is in a lane the caller may read."""
        return f"{_col(t, 'lane')} = ANY({lanes})"

    def may_read(self, lane: str, readable: Container[str]) -> bool:
        """`lane`, for a row already read (a locked record): whether its lane is readable."""
        return lane in readable

    def chosen(self, readable: Sequence[str], asked: Sequence[str] | None) -> list[str]:
        """The lanes a read covers: those the caller asked for (None: all) that it may read."""
        return list(readable) if asked is None else [x for x in asked if x in readable]

    def in_lane(self, t: str, lane: str) -> str:
        """SQL: the row is in `lane`, one of the caller's lanes read one at a time (each
        lane's rows in index order, merged)."""
        return f"{_col(t, 'lane')} = {lane}"

    def event(self, t: str, lanes: str) -> str:
        """SQL: the caller may read the event: of a readable lane, or of none (policy
        changes concern everyone), and of a readable second lane if it names one."""
        other = f"{_col(t, 'payload')}->>'{OTHER_LANE}'"
        return (
            f"({self.lane(t, lanes)} OR {_col(t, 'lane')} IS NULL)"
            f" AND ({other} IS NULL OR {other} = ANY({lanes}))"
        )

    def may_read_event(
        self,
        lane: str | None,
        readable: Container[str],
        payload: Mapping[str, Any] | None = None,
    ) -> bool:
        """`event`, for an event already read: whether a reader of `readable` gets it
        (with its payload: the second lane it names too)."""
        if payload is not None:
            other = payload.get(OTHER_LANE)
            if isinstance(other, str) and other not in readable:
                return False
        return lane is None or lane in readable

    # -- records ----------------------------------------------------------------

    def record(self, t: str, lanes: str, at: str | None = None) -> str:
        """SQL: the caller may see the record now (or as it was at `at`)."""
        return self.lane(t, lanes) + self.not_retired(t, at)

    def record_in_lane(self, t: str, lane: str) -> str:
        """SQL: `record` for one of the caller's lanes read one at a time (`in_lane`), in
        index order: its expiry is told by the pending expiries (`unexpired`), so that the
        lane's rows are still read from the index alone."""
        if self.retired is None:
            return self.in_lane(t, lane)
        retired = _col(t, self.retired)
        unexpired = self.unexpired(_col(t, "id"), None)
        return f"{self.in_lane(t, lane)} AND {retired} IS NULL AND {unexpired}"

    def not_retired(self, t: str, at: str | None) -> str:
        """SQL to append: the record is not retired now (or its retirement in force now
        came after `at`); nothing while no record can be retired. A record retired at
        `at` and restored since is told by the version read at `at` (`alive`)."""
        if self.retired is None:
            return ""
        retired, expires = _col(t, self.retired), _col(t, self.expiry)
        if at is None:
            return f" AND {retired} IS NULL AND ({expires} IS NULL OR {expires} > {NOW})"
        return (
            f" AND ({retired} IS NULL OR {retired} > {at})"
            f" AND ({expires} IS NULL OR {expires} > {at})"
        )

    def retired_now(self, t: str, lanes: str) -> str:
        """SQL: the record is in a readable lane and retired now, or expired now (its
        readers are told so)."""
        if self.retired is None:
            return f"{self.lane(t, lanes)} AND false"
        retired, expires = _col(t, self.retired), _col(t, self.expiry)
        return f"{self.lane(t, lanes)} AND ({retired} IS NOT NULL OR {expires} <= {NOW})"

    def expired_now(self, t: str) -> str:
        """SQL: the record `t` is expired now and its tombstone not written yet (so the
        maintained counts still count it, and its readers are told of its expiry)."""
        if self.retired is None:
            return "false"
        return f"{_col(t, self.retired)} IS NULL AND {_col(t, self.expiry)} <= {NOW}"

    def unexpired(self, record_id: str, at: str | None) -> str:
        """SQL: the record `record_id` (an SQL expression) is not expired now (or at
        `at`) with its tombstone still to be written: what reads of memberships and of
        search's rows (still open until then) add. Now it probes the pending expiries
        (`ix_records_expiring`); at `at`, every expiry (`ix_records_expires_at`): a record
        whose current expiry came by `at` was expired then (an expiry is never set
        before the write that sets it)."""
        if self.retired is None:
            return "true"
        x = "xe_"
        due = self.expired_now(x) if at is None else f"{x}.{self.expiry} <= {at}"
        return f"NOT EXISTS (SELECT 1 FROM records {x} WHERE {x}.id = {record_id} AND {due})"

    def alive(self, v: str, at: str | None = None) -> str:
        """SQL: the record version `v` (a ledger entry, the newest written by the instant
        read at, `at`) is no tombstone, nor expired then: a record retired then is absent
        from a read then."""
        state = _col(v, "state")
        alive = f"{state}->'{self.tombstone}' IS NULL"
        if at is None:
            return alive
        expires = f"({state}->>'{self.expiry}')::timestamptz"
        return f"{alive} AND ({state}->>'{self.expiry}' IS NULL OR {expires} > {at})"

    def alive_state(self, state: Mapping[str, Any]) -> bool:
        """`alive`, for a version already read (its expiry aside)."""
        return state.get(self.tombstone) is None

    # -- memberships of edge properties -----------------------------------------

    def recorded_by(self, t: str, at: str) -> str:
        """SQL: the membership interval had begun by `at` (what came after stays unseen)."""
        return f"{_col(t, 'recorded_from')} <= {at}"

    def held(self, t: str, at: str | None) -> str:
        """SQL: the membership row is one held now, or held at the instant `at`."""
        if at is None:
            # Spelled as the partial index's predicate, so the planner can use it.
            return f"{_col(t, 'recorded_to')} IS NULL"
        to = _col(t, "recorded_to")
        return f"{self.recorded_by(t, at)} AND ({to} IS NULL OR {to} > {at})"

    def left_at(self, t: str, at: str | None) -> str:
        """SQL: when the membership ended, as seen at `at`: a leaving after `at` unseen."""
        to = _col(t, "recorded_to")
        if at is None:
            return to
        return f"(CASE WHEN {to} > {at} THEN NULL ELSE {to} END)"

    def seen_left_at(self, left_at: D | None, at: D | None) -> D | None:
        """`left_at`, for a membership already read."""
        return None if at is not None and left_at is not None and left_at > at else left_at

    def was_held(self, recorded_from: D, recorded_to: D | None, at: D) -> bool:
        """`held` at the instant `at`, for a membership already read."""
        return recorded_from <= at and (recorded_to is None or recorded_to > at)

    def member(self, t: str, lanes: str, at: str | None) -> str:
        """SQL: a membership the caller may see, held now (or at `at`), of a record not
        expired then."""
        held = f"{self.lane(t, lanes)} AND {self.held(t, at)}"
        return f"{held} AND {self.unexpired(_col(t, 'record_id'), at)}"

    # -- corrections ------------------------------------------------------------

    def correction(self, t: str, lanes: str, at: str | None) -> str:
        """SQL: a correction the caller may see, made by `at` if given."""
        made = f" AND {_col(t, 'at')} <= {at}" if at is not None else ""
        return self.lane(t, lanes) + made

    # -- typed edges ------------------------------------------------------------

    def edge(self, t: str, lanes: str, at: str | None, include_expired: bool = False) -> str:
        """SQL: a typed edge the caller may see at `at` (None: now): both its records in
        readable lanes and neither retired then, valid then (`valid_at <= T <
        invalid_at`) and recorded by then; `include_expired` also shows the edges no
        longer valid at T (never those to a record retired at T)."""
        shown = [
            self.edge_ends(t, lanes),
            self.edge_valid(t, at, include_expired),
            self.edge_ends_kept(t, at),
        ]
        return " AND ".join(shown)

    def edge_ends_kept(self, t: str, at: str | None) -> str:
        """SQL: neither record the edge joins is retired (now, or at `at`): an edge to a
        forgotten record is gone from every read, whatever its own validity. Retiring a
        record retires its live edges, but one already retired with a later `invalidAt`
        keeps that time, so its validity alone would still show it.

        Now, each end is its own equality against the retired records (an index of
        their ids alone, `ix_records_retired`): probed, or hashed once when there are few,
        never two primary key lookups and heap fetches an edge; and each end is probed
        in the pending expiries likewise (`unexpired`)."""
        if self.retired is None:
            return "true"
        if at is None:
            retired = [
                f"NOT EXISTS (SELECT 1 FROM records x_ WHERE x_.id = {_col(t, end)} "
                f"AND x_.{self.retired} IS NOT NULL)"
                for end in ("from_id", "to_id")
            ]
            expired = [self.unexpired(_col(t, end), None) for end in ("from_id", "to_id")]
            return " AND ".join(retired + expired)
        # Retired at `at`: the newest version of either end written by then is a tombstone
        # (or expired by then).
        ends = f"{_col(t, 'from_id')}, {_col(t, 'to_id')}"
        return (
            f"NOT EXISTS (SELECT 1 FROM unnest(ARRAY[{ends}]) AS x_(id) CROSS JOIN LATERAL ("
            f"SELECT v_.state FROM ledger v_ WHERE v_.kind = 'record' AND v_.object_id = x_.id "
            f"AND v_.at <= {at} ORDER BY v_.version DESC LIMIT 1) v_ "
            f"WHERE NOT ({self.alive('v_', at)}))"
        )

    def edge_ends(self, t: str, lanes: str) -> str:
        """SQL: the caller may read both records the edge joins (it sees nothing of an
        edge to a record it cannot read, not even that it exists)."""
        return f"{self.lane(t, lanes)} AND {_col(t, 'to_lane')} = ANY({lanes})"

    def edge_valid(self, t: str, at: str | None, include_expired: bool = False) -> str:
        """SQL: the edge (one the caller may read) is valid and recorded at `at`; the
        edges this leaves out that `include_expired` shows are the expired ones."""
        v = self.edge_validity
        when = "now()" if at is None else at
        shown = [f"{_col(t, v.valid_at)} <= {when}"]
        if at is not None:
            shown.append(f"{_col(t, v.recorded_at)} <= {at}")
        if not include_expired:
            until = _col(t, v.invalid_at)
            shown.append(f"({until} IS NULL OR {when} < {until})")
        return " AND ".join(shown)

    # -- labels -----------------------------------------------------------------

    def shown_label(self, label: str) -> str:
        """SQL: the label (an SQL expression) is listed as an edge property or a
        hyperedge: the hidden ones are not (adjustment chains are shown under a
        record's adjustments), nor metadata."""
        hidden = [f"{label} <> '{hidden}'" for hidden in self.hidden_labels]
        return " AND ".join([*hidden, f"NOT ({self.metadata_label(label)})"])

    def caller_label(self, label: str) -> str:
        """SQL: the label is a caller's own, not one only the engine writes."""
        prefix = self.engine_prefix
        return f"left({label}, {len(prefix)}) <> '{prefix}'"

    def metadata_label(self, label: str) -> str:
        """SQL: the label is one of record metadata."""
        prefix = self.metadata_prefix
        return f"left({label}, {len(prefix)}) = '{prefix}'"

    def is_metadata(self, label: str) -> bool:
        """`metadata_label`, for a label already read."""
        return label.startswith(self.metadata_prefix)

    def shown(self, properties: Sequence[P]) -> list[P]:
        """`shown_label`, for properties already read."""
        return [
            p
            for p in properties
            if p.label not in self.hidden_labels and not self.is_metadata(p.label)
        ]

    def declared(self, properties: Sequence[P]) -> list[P]:
        """`caller_label`, for properties already read."""
        return [p for p in properties if not p.label.startswith(self.engine_prefix)]

    def walked(self, properties: Sequence[P]) -> list[P]:
        """The properties a record holds memberships of (what gather, traverse, counts
        and hyperedges read): all but metadata."""
        return [p for p in properties if not self.is_metadata(p.label)]

    def metadata(self, properties: Sequence[P]) -> dict[str, str]:
        """A record's metadata, by key (the label without its prefix)."""
        n = len(self.metadata_prefix)
        return {p.label[n:]: p.value for p in properties if self.is_metadata(p.label)}

    def metadata_json(self, pairs: str) -> str:
        """SQL: `metadata` of a record's properties (a JSON array of [label, value]) as a
        JSON object."""
        n = len(self.metadata_prefix)
        return (
            f"(SELECT coalesce(json_object_agg(substr(x.p->>0, {n + 1}), x.p->>1 "
            f"ORDER BY x.o), '{{}}'::json) FROM jsonb_array_elements({pairs}) "
            f"WITH ORDINALITY AS x(p, o) WHERE {self.metadata_label('x.p->>0')})"
        )


RULE = Rule()


def core(sql: str, **values: Any) -> TextClause:
    """A predicate of `RULE` (written with `CORE_LANES`, `CORE_AT`) as a SQLAlchemy Core
    clause, with the values of its binds if given here rather than at execution."""
    clause = text(sql)
    return clause.bindparams(**values) if values else clause


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


class Event(Protocol):
    """What the rule reads of an audit event (`store.ledger.audit.AuditEvent`): its kind,
    its place in the feed and its payload; a dataclass, so that a payload the reader may
    not see whole is replaced in a copy."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def seq(self) -> int: ...

    @property
    def kind(self) -> str: ...

    @property
    def payload(self) -> Mapping[str, Any]: ...


E = TypeVar("E", bound=Event)


def names_records(event: Event) -> bool:
    """Whether the payload names or counts records (so it depends on the reader)."""
    return event.kind in _NAMING


async def read_named(db: Reader, events: Sequence[Event]) -> Named:
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


def readable_payload(event: E, readable: Container[str], named: Named) -> E:
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


def _named_ids(event: Event) -> list[str]:
    found = [event.payload.get(key) for key in _RECORD_KEYS.get(event.kind, ())]
    for key in _RECORD_LISTS.get(event.kind, ()):
        listed = event.payload.get(key)
        if isinstance(listed, list):
            found.extend(listed)
    return [i for i in found if isinstance(i, str)]
