"""The record as the store holds it: frozen dataclasses parsed once from rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from policies.properties import Property, property_of
from store.kinds.record import embedding
from store.ledger.command import Event, Head, Write
from store.ledger.entry import Row
from store.reads.visibility import RULE

PropertyPairs = tuple[tuple[str, str], ...]

# The key of a record's state holding when it expires (`RULE.expiry`).
EXPIRES = RULE.expiry


def instant_text(at: datetime) -> str:
    """An instant as a state holds it: ISO 8601 in UTC, to the microsecond."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Retired:
    """What a tombstone adds to a record's state: why it was retired (None: no reason
    given). When and by whom are its entry's time and actor."""

    reason: str | None = None


@dataclass(frozen=True)
class Erased:
    """What an erasure entry adds to a record's state: why, whether the edge properties
    were kept (the lane's policy says they are not personal), and every entry it erased
    as {kind, id, version, hash}. Who and when are its entry's actor and time."""

    reason: str
    properties_kept: bool
    entries: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "properties_kept": self.properties_kept,
            "entries": [dict(e) for e in self.entries],
        }


@dataclass(frozen=True)
class RecordState:
    """A record's whole state: what one ledger entry holds.

    A retired record's state keeps its content and properties as they were (restoring
    it brings them back) beside `retired`; the projection rule holds no membership for
    it (`store.kinds.record.projection`).
    """

    content: str
    lane: str
    source_type: str
    authority: str
    properties: tuple[Property, ...]
    retired: Retired | None = None
    # The caller's vector for the content (store.kinds.record.embedding), or None.
    embedding: bytes | None = None
    # The instant from which the record is treated as retired (None: it never expires).
    expires_at: datetime | None = None

    def expired(self, at: datetime) -> bool:
        """Whether the record is expired at `at` (retired by the instant, swept or not)."""
        return self.expires_at is not None and self.expires_at <= at

    # Set on the erasure entry and every version after it (store.kinds.record.erase).
    erased: Erased | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "content": self.content,
            "lane": self.lane,
            "source_type": self.source_type,
            "authority": self.authority,
            "properties": [[p.label, p.value] for p in self.properties],
        }
        # Only a tombstone has the key, so every other entry's canonical bytes are as
        # they were before records could be retired.
        if self.retired is not None:
            data["retired"] = {"reason": self.retired.reason}
        # Likewise only an entry with a vector has this key.
        if self.embedding is not None:
            data["embedding"] = embedding.to_texts(self.embedding)
        # And only an entry of a record that expires.
        if self.expires_at is not None:
            data[EXPIRES] = instant_text(self.expires_at)
        if self.erased is not None:
            data["erased"] = self.erased.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordState:
        retired = data.get("retired")
        vector = data.get("embedding")
        expires = data.get(EXPIRES)
        erased = data.get("erased")
        return cls(
            content=data["content"],
            lane=data["lane"],
            source_type=data["source_type"],
            authority=data["authority"],
            properties=parse_pairs(data["properties"]),
            retired=None if retired is None else Retired(retired.get("reason")),
            embedding=None if vector is None else embedding.from_texts(vector),
            expires_at=None if expires is None else datetime.fromisoformat(expires),
            erased=None if erased is None else _erased(erased),
        )

    def held(self) -> tuple[Property, ...]:
        """The properties whose memberships the record holds: none while it is retired,
        never its metadata."""
        return () if self.retired is not None else tuple(RULE.walked(self.properties))

    @property
    def metadata(self) -> dict[str, str]:
        """Its metadata, by key."""
        return RULE.metadata(self.properties)


def _erased(data: Mapping[str, Any]) -> Erased:
    return Erased(data["reason"], data["properties_kept"], tuple(data.get("entries", ())))


def parse_pairs(pairs: Sequence[Sequence[str]]) -> tuple[Property, ...]:
    return tuple(property_of(label, value) for label, value in pairs)


def visible(properties: Sequence[Property]) -> list[Property]:
    """The caller's edge properties plus connections and groups, as listings show them."""
    return RULE.shown(properties)


def declared(properties: Sequence[Property]) -> list[Property]:
    """The caller's own (non-reserved) edge properties."""
    return RULE.declared(properties)


# Who retires an expired record, and why (the sweeper's tombstone, and what a read says
# of an expired record before it is written).
EXPIRY_ACTOR = "edgeloom"
EXPIRY_REASON = "expired"


@dataclass(frozen=True)
class Retirement:
    """When, by whom and why a record was retired."""

    at: datetime
    actor: str
    reason: str | None


@dataclass(frozen=True)
class Record:
    """The current (or as-of) state of one record with its bookkeeping.

    `retired_by` is the actor of its tombstone while it is retired (the tombstone's
    time is `updated_at`: nothing writes a retired record but its restoring)."""

    id: str
    version: int
    state: RecordState
    created_at: datetime
    updated_at: datetime
    created_by: str
    ledger_hash: str = ""
    retired_by: str | None = None

    @property
    def lane(self) -> str:
        return self.state.lane

    @property
    def retirement(self) -> Retirement | None:
        """When, by whom and why it was retired; None while it is not."""
        retired = self.state.retired
        if retired is None:
            return None
        return Retirement(self.updated_at, self.retired_by or "", retired.reason)

    def retirement_at(self, at: datetime) -> Retirement | None:
        """`retirement`, or, for a record expired by `at` whose tombstone the gateway has
        not written yet, the retirement its expiry stands for."""
        expires = self.state.expires_at
        if self.state.retired is None and expires is not None and expires <= at:
            return Retirement(expires, EXPIRY_ACTOR, EXPIRY_REASON)
        return self.retirement

    @classmethod
    def at_entry(cls, first: Version, entry: Version) -> Record:
        """The record as its ledger entry `entry` left it, a tombstone too (`first`: its
        version 1), as the projection rule makes it."""
        return cls(
            id=entry.record_id,
            version=entry.number,
            state=entry.state,
            created_at=first.at,
            updated_at=entry.at,
            created_by=first.actor,
            ledger_hash=entry.hash,
            retired_by=entry.actor if entry.state.retired is not None else None,
        )

    @classmethod
    def from_row(cls, row: Row) -> Record:
        """A record from a records row (the retired columns read when it has them)."""
        retired_at = _optional(row, "retired_at")
        return cls(
            id=row["id"],
            version=row["version"],
            state=RecordState(
                content=row["content"],
                lane=row["lane"],
                source_type=row["source_type"],
                authority=row["authority"],
                properties=parse_pairs(row["properties"]),
                retired=None if retired_at is None else Retired(row["retired_reason"]),
                embedding=_embedding(_optional(row, "embedding")),
                expires_at=_optional(row, "expires_at"),
                erased=_erased_of(_optional(row, "erased")),
            ),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            created_by=row["created_by"],
            ledger_hash=row["ledger_hash"],
            retired_by=None if retired_at is None else row["retired_by"],
        )


def _embedding(texts: Sequence[str] | None) -> bytes | None:
    # The write path's lock reads it from the record's newest ledger entry; other reads
    # leave it out (a vector is for search, not for showing).
    return None if texts is None else embedding.from_texts(texts)


def _erased_of(data: Mapping[str, Any] | None) -> Erased | None:
    # Read, like the vector, from the newest ledger entry by the write path's lock.
    return None if data is None else _erased(data)


def _optional(row: Row, key: str) -> Any:
    # Current reads never return a retired row, so most of them leave the columns out.
    try:
        return row[key]
    except KeyError:
        return None


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


def next_version(record: Record, state: RecordState, event: str, events: Sequence[Event]) -> Write:
    """The next version of `record` with `state`, reported by `events`."""
    return Write(
        kind="record",
        object_id=record.id,
        event=event,
        state=state.to_json(),
        previous=Head(record.version, record.ledger_hash, record.updated_at),
        events=tuple(events),
        lane=record.lane,
        record_id=record.id,
    )
