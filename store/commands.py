"""Write commands: what a resolver asks the store to do, as plain frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field

from store.records import Record


@dataclass(frozen=True)
class Ingest:
    content: str
    properties: tuple[str, ...] = ()
    source_type: str | None = None
    lane: str | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Update:
    record_id: str
    content: str | None = None
    properties: tuple[str, ...] | None = None
    expected_version: int | None = None


@dataclass(frozen=True)
class AddProperties:
    record_id: str
    properties: tuple[str, ...]


@dataclass(frozen=True)
class RemoveProperties:
    record_id: str
    labels: tuple[str, ...] = ()
    properties: tuple[str, ...] = ()


@dataclass(frozen=True)
class PropertyChange:
    """What an add or remove did: each list holds `label:value` strings."""

    record: Record
    added: list[str] = field(default_factory=list)
    already_held: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    not_held: list[str] = field(default_factory=list)
