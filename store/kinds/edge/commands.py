"""The commands of typed edges: upsert on the live key, retire, resolve a contradiction.

Each decides on the current state read under its locks, asks the guard
(`policies.guard.decide_edge`: both records readable, the from record's lane
writable) and writes one new version of the edge with its event; one that changes
nothing writes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policies.guard import EdgeChange, decide_edge
from store.errors import InvalidInputError, NotFoundError, StoreError
from store.ids import new_edge_id
from store.kinds.edge import checks
from store.kinds.edge.model import (
    ASSERTED,
    CONTRADICTS,
    DEFAULT_DETECTOR,
    DEFAULT_NAMESPACE,
    DEFAULT_WEIGHT,
    INFERRED,
    LIVE_KEY,
    RESOLUTIONS,
    RESOLVED,
    UNRESOLVED,
    Edge,
    state_of,
)
from store.kinds.edge.payloads import payload_for
from store.kinds.record.locks import Records, RecordsRead
from store.kinds.record.model import Record
from store.ledger.command import (
    Applied,
    Current,
    Event,
    Head,
    Locks,
    Plan,
    RowRef,
    Txn,
    Write,
)

KIND = "edge"


class EdgeHeldError(StoreError):
    """An inferred write to a key held by an asserted or resolved edge."""

    code = "CONFLICT"

    def __init__(self, edge: Edge) -> None:
        why = (
            f"resolved ({edge.resolution} by {edge.resolver})"
            if edge.conflict_state == RESOLVED
            else f"asserted by {edge.provenance_type} '{edge.provenance_actor}'"
        )
        super().__init__(
            f"edge '{edge.id}' holds ({edge.from_id}, {edge.to_id}, {edge.type}, "
            f"{edge.namespace}) and is {why}; an inferred write never overwrites an edge "
            "asserted by a human, agent or rule, nor a resolved one: write it under "
            "another namespace or type, or as one of those provenances"
        )
        self.edge_id = edge.id

    def extensions(self) -> dict[str, object]:
        return {"edgeId": self.edge_id}


class AlreadyRetiredError(StoreError):
    """Retiring an edge that is retired already: nothing changes."""

    code = "CONFLICT"

    def __init__(self, edge: Edge) -> None:
        assert edge.expired_at is not None
        until = "" if edge.invalid_at is None else f" (invalid from {edge.invalid_at.isoformat()})"
        super().__init__(
            f"edge '{edge.id}' was retired already at {edge.expired_at.isoformat()}{until}; "
            "nothing changed. Upsert its key again for a new live edge"
        )
        self.edge_id = edge.id

    def extensions(self) -> dict[str, object]:
        return {"edgeId": self.edge_id}


def _current(current: Current[RecordsRead], edge_id: str) -> tuple[Mapping[str, Any], Head] | None:
    state = current.states.get((KIND, edge_id))
    head = current.head(KIND, edge_id)
    return None if state is None or head is None else (state, head)


def _edge(edge_id: str, state: Mapping[str, Any], head: Head) -> Edge:
    return Edge.of(edge_id, state, head.version, head.at, head.hash)


def _write(
    edge_id: str, event: str, before: Any, state: dict[str, Any], head: Head | None
) -> Write:
    payload = payload_for(event, before, state, edge_id)
    assert payload is not None
    return Write(
        kind=KIND,
        object_id=edge_id,
        event=event,
        state=state,
        previous=head,
        events=(Event(event, payload),),
        lane=state["lane"],
        record_id=state["from_id"],
    )


def _written(applied: Applied[Record]) -> Edge:
    [entry] = applied.entries
    return Edge.from_entry(entry)


def _unchanged(edge: Edge) -> Plan[Edge]:
    return Plan((), lambda _: edge)


@dataclass(frozen=True)
class UpsertEdge:
    """Create the edge of the live key (from, to, type, namespace), or update it: the
    fields left None keep their value."""

    from_id: str
    to_id: str
    type: str
    namespace: str = DEFAULT_NAMESPACE
    weight: float | None = None
    confidence: float | None = None
    provenance_actor: str | None = None
    provenance_type: str | None = None
    evidence: Any = None
    conflict_state: str | None = None
    detector: str | None = None
    valid_at: datetime | None = None
    _key: tuple[str, str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        checks.check_name("type", self.type)
        checks.check_name("namespace", self.namespace)
        checks.check_unit("weight", self.weight)
        checks.check_unit("confidence", self.confidence)
        checks.check_provenance_type(self.provenance_type)
        checks.check_text("provenanceActor", self.provenance_actor)
        checks.check_text("detector", self.detector)
        checks.check_evidence(self.evidence)
        checks.check_conflict_state(self.type, self.conflict_state)
        key = (RowRef(self.from_id), RowRef(self.to_id), self.type, self.namespace)
        object.__setattr__(self, "_key", (KIND, LIVE_KEY, key))

    def locks(self) -> Locks:
        # The endpoints resolve (prefixes) and must be readable; the key is locked by
        # their full ids, so two upserts of one key, however named, make one edge.
        return Records((self.from_id, self.to_id)).locks(keys=(self._key,))

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Edge]:
        start, end = current.rows.record(self.from_id), current.rows.record(self.to_id)
        decide_edge(txn.rules, txn.agent, EdgeChange("record", self.from_id, start.lane, end.lane))
        if start.id == end.id:
            raise InvalidInputError(
                f"an edge joins two different records; fromId and toId both name '{start.id}'"
            )
        held = current.keyed.get(self._key)
        found = None if held is None else _current(current, held)
        if found is not None and found[0]["expired_at"] is not None:
            found = None  # retired while this call waited for it: the key is free
        given = self._given()
        if found is None:
            edge_id = new_edge_id()
            fields = {
                "from_id": start.id,
                "to_id": end.id,
                "type": self.type,
                "namespace": self.namespace,
                "lane": start.lane,
                "to_lane": end.lane,
                "weight": DEFAULT_WEIGHT,
                "confidence": None,
                "provenance_actor": txn.agent_name,
                "provenance_type": "agent",
                "evidence": None,
                "detector": DEFAULT_DETECTOR,
                "conflict_state": UNRESOLVED if self.type == CONTRADICTS else None,
                "resolution": None,
                "resolver": None,
                "winner_id": None,
                "valid_at": txn.at,
                "invalid_at": None,
                "expired_at": None,
                "created_at": txn.at,
            } | given
            state = state_of(fields)
            return Plan((_write(edge_id, "edge_upserted", None, state, None),), _written)
        before, head = found
        edge = _edge(held or "", before, head)
        if self.provenance_type == INFERRED and (
            edge.provenance_type in ASSERTED or edge.conflict_state == RESOLVED
        ):
            raise EdgeHeldError(edge)
        fields = {k: getattr(edge, k) for k in _STATE} | given
        if self.conflict_state == UNRESOLVED:
            # Reopening a conflict: its resolution stays in the edge's earlier versions.
            fields |= {"resolution": None, "resolver": None, "winner_id": None}
        state = state_of(fields)
        if state == dict(before):
            return _unchanged(edge)
        return Plan((_write(edge.id, "edge_upserted", before, state, head),), _written)

    def _given(self) -> dict[str, Any]:
        given = {
            "weight": self.weight,
            "confidence": self.confidence,
            "provenance_actor": self.provenance_actor,
            "provenance_type": self.provenance_type,
            "evidence": self.evidence,
            "conflict_state": self.conflict_state,
            "detector": self.detector,
            "valid_at": self.valid_at,
        }
        return {k: v for k, v in given.items() if v is not None}


_STATE = [
    "from_id",
    "to_id",
    "type",
    "namespace",
    "lane",
    "to_lane",
    "weight",
    "confidence",
    "provenance_actor",
    "provenance_type",
    "evidence",
    "detector",
    "conflict_state",
    "resolution",
    "resolver",
    "winner_id",
    "valid_at",
    "invalid_at",
    "expired_at",
    "created_at",
]


def _existing(current: Current[RecordsRead], edge_id: str, txn: Txn) -> Edge:
    """The edge the caller names, if it may read both its records; its lane writable."""
    found = _current(current, edge_id)
    if found is None:
        raise NotFoundError("edge", edge_id)
    edge = _edge(edge_id, *found)
    decide_edge(txn.rules, txn.agent, EdgeChange("edge", edge_id, edge.lane, edge.to_lane))
    return edge


@dataclass(frozen=True)
class RetireEdge:
    """Retire an edge: it stops holding at `invalid_at` (default now) and is recorded as
    retired now, as a new version; nothing is deleted."""

    edge_id: str
    invalid_at: datetime | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "edge_id", checks.check_edge_id(self.edge_id))

    def locks(self) -> Locks:
        return Locks(objects=((KIND, self.edge_id),))

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Edge]:
        edge = _existing(current, self.edge_id, txn)
        if edge.retired:
            raise AlreadyRetiredError(edge)
        until = txn.at if self.invalid_at is None else self.invalid_at
        if until < edge.valid_at:
            raise InvalidInputError(
                f"invalidAt {until.isoformat()} is before the edge's validAt "
                f"{edge.valid_at.isoformat()}; give a time at or after it, or leave it out (now)"
            )
        fields = {k: getattr(edge, k) for k in _STATE} | {"invalid_at": until, "expired_at": txn.at}
        before, head = _current(current, self.edge_id) or ({}, None)
        state = state_of(fields)
        return Plan((_write(edge.id, "edge_retired", before, state, head),), _written)


def retired_with_record(
    txn: Txn, current: Current[RecordsRead], edge_id: str, records: Collection[str]
) -> Write | None:
    """The version retiring a live edge because a record it joins, one of `records`, is
    retired, in that command's transaction (None: it is retired already, or joins none
    of them). It stops holding now (or at its validAt, if that is later); the record's
    retirement is what is decided, so neither end's lane is asked again. Restoring the
    record leaves it retired."""
    found = _current(current, edge_id)
    if found is None:
        return None
    edge = _edge(edge_id, *found)
    if edge.retired or (edge.from_id not in records and edge.to_id not in records):
        return None
    until = max(txn.at, edge.valid_at)
    fields = {k: getattr(edge, k) for k in _STATE} | {"invalid_at": until, "expired_at": txn.at}
    before, head = found
    return _write(edge.id, "edge_retired", before, state_of(fields), head)


@dataclass(frozen=True)
class ResolveConflict:
    """Resolve a contradiction: the resolution and its resolver become the edge's next
    version; SUPERSEDED names the winning endpoint."""

    edge_id: str
    resolution: str
    resolver: str
    winner_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "edge_id", checks.check_edge_id(self.edge_id))
        if self.resolution not in RESOLUTIONS:
            raise InvalidInputError(
                f"resolution '{self.resolution[:64]}' is unknown; it is one of {list(RESOLUTIONS)}",
                allowed=list(RESOLUTIONS),
            )
        checks.check_text("resolver", self.resolver)

    def locks(self) -> Locks:
        return Locks(objects=((KIND, self.edge_id),))

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Edge]:
        edge = _existing(current, self.edge_id, txn)
        if edge.type != CONTRADICTS:
            raise InvalidInputError(
                f"edge '{edge.id}' is a '{edge.type}' edge; only '{CONTRADICTS}' edges are "
                "resolved (list them with conflicts)"
            )
        winner = self._winner(edge)
        fields = {k: getattr(edge, k) for k in _STATE} | {
            "conflict_state": RESOLVED,
            "resolution": self.resolution,
            "resolver": self.resolver,
            "winner_id": winner,
        }
        before, head = _current(current, self.edge_id) or ({}, None)
        state = state_of(fields)
        if state == dict(before):
            return _unchanged(edge)
        return Plan((_write(edge.id, "conflict_resolved", before, state, head),), _written)

    def _winner(self, edge: Edge) -> str | None:
        ends = f"the edge's fromId '{edge.from_id}' or its toId '{edge.to_id}'"
        if self.resolution != "SUPERSEDED":
            if self.winner_id is not None:
                raise InvalidInputError(
                    f"winnerId is only for resolution SUPERSEDED, not {self.resolution}; "
                    "leave it out"
                )
            return None
        if self.winner_id is None:
            raise InvalidInputError(f"resolution SUPERSEDED needs winnerId: {ends}")
        named = self.winner_id.strip().lower()
        matches = [e for e in (edge.from_id, edge.to_id) if len(named) >= 9 and e.startswith(named)]
        if len(matches) != 1:
            raise InvalidInputError(
                f"winnerId '{self.winner_id[:64]}' is not an endpoint of edge '{edge.id}'; "
                f"it must be {ends}",
                allowed=[edge.from_id, edge.to_id],
            )
        return matches[0]
