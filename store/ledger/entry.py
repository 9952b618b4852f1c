"""A ledger entry: one version of one ledgered object, as every kind writes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


class Row(Protocol):
    """A row by column name: a SQLAlchemy mapping or an asyncpg record."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True)
class Entry:
    """One ledger entry: one version of one ledgered object, hash-chained to the last."""

    kind: str
    object_id: str
    version: int
    event: str
    actor: str
    at: datetime
    policy_version: int
    state: Mapping[str, Any]
    prev_hash: str | None
    hash: str
    # The digest of `state` its hash covers (hash format 3); None for earlier formats.
    state_sha256: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> Entry:
        """An entry from a ledger row or mapping (an export line, its time parsed; a line
        exported before hash format 3 has no `state_sha256`)."""
        fields = {name: row[name] for name in cls.__dataclass_fields__ if name != "state_sha256"}
        try:
            digest = row["state_sha256"]
        except KeyError:
            digest = None
        return cls(**fields, state_sha256=digest)

    def row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "object_id": self.object_id,
            "version": self.version,
            "event": self.event,
            "actor": self.actor,
            "at": self.at,
            "policy_version": self.policy_version,
            "state": self.state,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
            "state_sha256": self.state_sha256,
        }
