"""A typed edge as its ledger entries hold it, and as its projection row holds it.

The ledger state is the edge's whole state in the canonical bytes' vocabulary (strings,
integers, null, lists, objects): times as canonical UTC strings, `weight` and
`confidence` as the decimal text of the number given, so an entry's hash never depends
on how a float is printed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from store.ledger.entry import Entry
from store.ledger.hashing import canonical_time

PROVENANCE_TYPES = ("human", "agent", "rule", "frontmatter", "inferred", "detected")
# Whoever asserted an edge of these provenances outranks an inferred write.
ASSERTED = ("human", "agent", "rule")
INFERRED = "inferred"
CONTRADICTS = "contradicts"
UNRESOLVED = "unresolved"
RESOLVED = "resolved"
RESOLUTIONS = ("ACCEPTED_DUAL", "SUPERSEDED", "REFUTED", "MERGED")
DEFAULT_DETECTOR = "manual@1"
DEFAULT_NAMESPACE = "default"
DEFAULT_WEIGHT = 1.0
LIVE_KEY = "live"
EVENT_KINDS = ("edge_upserted", "edge_retired", "conflict_resolved")

_TIMES = ("valid_at", "invalid_at", "expired_at", "created_at")
_NUMBERS = ("weight", "confidence")


def time_text(at: datetime | None) -> str | None:
    return None if at is None else canonical_time(at)


def conflict_sql(alias: str) -> str:
    """SQL: `Edge.conflict` of the edge row `alias`.

    A resolved contradiction reads as its resolution in lower case (`accepted_dual`,
    `superseded`, `refuted`, `merged`), as the seed's `conflict_state` does. The ledger
    keeps `resolved` beside the resolution, as it always has, so every resolved edge,
    whenever it was resolved, is stored one way and read one way; no entry is rewritten,
    and the review queue's status filter stays on the stored state."""
    return (
        f"(CASE WHEN {alias}.conflict_state = '{RESOLVED}' AND {alias}.resolution IS NOT NULL "
        f"THEN lower({alias}.resolution) ELSE {alias}.conflict_state END)"
    )


def number_text(value: float | None) -> str | None:
    return None if value is None else repr(float(value))


@dataclass(frozen=True)
class Edge:
    """One typed edge: what it joins, who said it and how sure, its evidence, its
    conflict state, and its validity (valid from, until, when it was retired)."""

    id: str
    from_id: str
    to_id: str
    type: str
    namespace: str
    lane: str
    to_lane: str
    weight: float
    confidence: float | None
    provenance_actor: str
    provenance_type: str
    evidence: Any
    detector: str
    conflict_state: str | None
    resolution: str | None
    resolver: str | None
    winner_id: str | None
    valid_at: datetime
    invalid_at: datetime | None
    expired_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int
    ledger_hash: str

    @property
    def retired(self) -> bool:
        return self.expired_at is not None

    @property
    def conflict(self) -> str | None:
        """Its conflict state as reads tell it (`conflict_sql` in SQL)."""
        if self.conflict_state == RESOLVED and self.resolution is not None:
            return self.resolution.lower()
        return self.conflict_state

    @classmethod
    def from_entry(cls, entry: Entry) -> Edge:
        return cls.of(entry.object_id, entry.state, entry.version, entry.at, entry.hash)

    @classmethod
    def of(
        cls, edge_id: str, state: Mapping[str, Any], version: int, at: datetime, hash: str
    ) -> Edge:
        """The edge whose entry `version`, written at `at`, holds `state`."""
        values: dict[str, Any] = {k: state[k] for k in _STATE_KEYS}
        for k in _TIMES:
            values[k] = None if state[k] is None else datetime.fromisoformat(state[k])
        for k in _NUMBERS:
            values[k] = None if state[k] is None else float(state[k])
        return cls(id=edge_id, **values, updated_at=at, version=version, ledger_hash=hash)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Edge:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})

    def row(self) -> dict[str, Any]:
        return asdict(self)


_STATE_KEYS = tuple(
    k for k in Edge.__dataclass_fields__ if k not in ("id", "updated_at", "version", "ledger_hash")
)
COLUMNS = tuple(Edge.__dataclass_fields__)


def state_of(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The ledger state for an edge's fields (times and numbers as their text)."""
    state = {k: fields[k] for k in _STATE_KEYS}
    for k in _TIMES:
        state[k] = time_text(state[k])
    for k in _NUMBERS:
        state[k] = number_text(state[k])
    return state


def fields_of(edge: Edge) -> dict[str, Any]:
    """The fields of `edge` that its ledger state holds."""
    return {k: getattr(edge, k) for k in _STATE_KEYS}
