"""What a ledger entry implies for its audit events: the words a kind says it in.

Each kind says what its entries imply (`Kind.implied`); `store.ledger.event_check`
compares the stored events with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One difference between an entry's events and what it implies. `seq`: the cursor
    of the event that differs, None when the difference is the entry's (an event it
    implies is missing); `event`: the event the text names, if any."""

    seq: int | None
    kind: str
    object_id: str
    version: int
    text: str
    event: int | None = None

    def __str__(self) -> str:
        where = f"{self.object_id} v{self.version}"
        return (
            f"{where}: {self.text}"
            if self.seq is None
            else f"event {self.seq} ({where}): {self.text}"
        )


@dataclass(frozen=True)
class Implied:
    """An audit event an entry implies: its kind and payload."""

    kind: str
    payload: dict[str, Any]
    # Payload fields that name other objects: checked by the kind's `Links` once every
    # entry is read, not against this payload.
    linked: tuple[str, ...] = ()


@dataclass(frozen=True)
class Shared:
    """The columns every event of one entry shares."""

    record_id: str | None
    lane: str | None
    version_before: int | None


@dataclass
class Links:
    """What one kind's entries say about each other, gathered while they are read, and the
    payload fields that wait on it (`Implied.linked`). A kind whose events name other
    objects keeps its own (`Kind.links`) and says how each such field is checked."""

    waiting: list[tuple[Problem, tuple[str, ...], dict[str, Any]]] = field(default_factory=list)

    def check(self, me: str, name: str, payload: dict[str, Any]) -> str | None:
        """What is wrong with the field `name` of an event of the object `me`, now that
        every entry is read (None: nothing)."""
        return None

    def problems(self) -> Iterator[Problem]:
        """The fields that name other objects, checked now that every entry is read."""
        for where, names, payload in self.waiting:
            for name in names:
                text = self.check(where.object_id, name, payload)
                if text is not None:
                    yield Problem(where.seq, where.kind, where.object_id, where.version, text)


def differs(name: str, stored: object, expected: object, by: str = "entries imply") -> str:
    """How a payload field differs from what was expected."""
    return f"payload field '{name}' is {stored!r}; the {by} {expected!r}"
