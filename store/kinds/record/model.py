"""The record as the store holds it: frozen dataclasses parsed once from rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from policies.properties import Property, property_of
from store.reads.visibility import RULE

PropertyPairs = tuple[tuple[str, str], ...]


class Row(Protocol):
    """A row by column name: a SQLAlchemy mapping or an asyncpg record."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True)
class RecordState:
    """A record's whole state: what one ledger entry holds."""

    content: str
    lane: str
    source_type: str
    authority: str
    properties: tuple[Property, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "lane": self.lane,
            "source_type": self.source_type,
            "authority": self.authority,
            "properties": [[p.label, p.value] for p in self.properties],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordState:
        return cls(
            content=data["content"],
            lane=data["lane"],
            source_type=data["source_type"],
            authority=data["authority"],
            properties=parse_pairs(data["properties"]),
        )


def parse_pairs(pairs: Sequence[Sequence[str]]) -> tuple[Property, ...]:
    return tuple(property_of(label, value) for label, value in pairs)


def visible(properties: Sequence[Property]) -> list[Property]:
    """The caller's edge properties plus connections and groups, as listings show them."""
    return RULE.shown(properties)


def declared(properties: Sequence[Property]) -> list[Property]:
    """The caller's own (non-reserved) edge properties."""
    return RULE.declared(properties)


@dataclass(frozen=True)
class Record:
    """The current (or as-of) state of one record with its bookkeeping."""

    id: str
    version: int
    state: RecordState
    created_at: datetime
    updated_at: datetime
    created_by: str
    ledger_hash: str = ""

    @property
    def lane(self) -> str:
        return self.state.lane

    @classmethod
    def from_row(cls, row: Row) -> Record:
        return cls(
            id=row["id"],
            version=row["version"],
            state=RecordState(
                content=row["content"],
                lane=row["lane"],
                source_type=row["source_type"],
                authority=row["authority"],
                properties=parse_pairs(row["properties"]),
            ),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            created_by=row["created_by"],
            ledger_hash=row["ledger_hash"],
        )


@dataclass(frozen=True)
class Version:
    """One ledger entry of a record."""

    record_id: str
    number: int
    at: datetime
    event: str
    actor: str
    policy_version: int
    state: RecordState
    hash: str

    @classmethod
    def from_row(cls, row: Row) -> Version:
        return cls(
            record_id=row["object_id"],
            number=row["version"],
            at=row["at"],
            event=row["event"],
            actor=row["actor"],
            policy_version=row["policy_version"],
            state=RecordState.from_json(row["state"]),
            hash=row["hash"],
        )


@dataclass(frozen=True)
class AuditEvent:
    """One audit event, as the feed and the audit query give it."""

    seq: int
    id: str
    kind: str
    record_id: str | None
    lane: str | None
    actor: str
    at: datetime
    payload: Mapping[str, Any]
    version_before: int | None
    version_after: int | None
    object_kind: str = "record"  # the kind of ledger entry it reports

    @classmethod
    def from_row(cls, row: Row) -> AuditEvent:
        return cls(
            seq=row["seq"],
            id=row["id"],
            kind=row["kind"],
            record_id=row["record_id"],
            lane=row["lane"],
            actor=row["actor"],
            at=row["at"],
            payload=row["payload"],
            version_before=row["version_before"],
            version_after=row["version_after"],
            object_kind=row["object_kind"],
        )
