"""The payload rule on its own: what a reader of some lanes may see of an event's payload."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from store.ledger.audit import AuditEvent
from store.reads.visibility import Named, readable_payload

NAMED = Named(
    lanes={"sr_mine": "notes", "sr_theirs": "private"},
    members={7: ["notes", "private", "private", "notes", "notes"]},
)
NOTES = frozenset({"notes"})


def event(kind: str, payload: dict[str, Any], seq: int = 1) -> AuditEvent:
    return AuditEvent(
        seq=seq,
        id=f"ae_{seq}",
        kind=kind,
        record_id="sr_mine",
        lane="notes",
        actor="curator",
        at=datetime(2026, 1, 1, tzinfo=UTC),
        payload=payload,
        version_before=1,
        version_after=2,
    )


def seen(kind: str, payload: dict[str, Any], seq: int = 1) -> dict[str, Any]:
    return dict(readable_payload(event(kind, payload, seq), NOTES, NAMED).payload)


def test_a_named_record_of_another_lane_disappears() -> None:
    assert seen("connected", {"property": "p", "other": "sr_theirs"}) == {"property": "p"}
    assert seen("connected", {"property": "p", "other": "sr_mine"}) == {
        "property": "p",
        "other": "sr_mine",
    }
    adjusted = {"adjustments": ["c"], "adjusts": ["sr_mine", "sr_theirs"]}
    assert seen("adjusted", adjusted) == {"adjustments": ["c"], "adjusts": ["sr_mine"]}
    assert seen("adjusted", {"adjustment": "c", "adjustedBy": "sr_theirs"}) == {"adjustment": "c"}


def test_a_record_whose_lane_is_unknown_is_not_named() -> None:
    assert seen("connected", {"property": "p", "other": "sr_unknown"}) == {"property": "p"}


def test_a_count_counts_only_readable_members() -> None:
    assert seen("grouped", {"property": "g", "members": 5}, seq=7) == {
        "property": "g",
        "members": 3,
    }
    everyone = readable_payload(
        event("grouped", {"members": 5}, seq=7), frozenset({"notes", "private"}), NAMED
    )
    assert everyone.payload == {"members": 5}


def test_a_payload_naming_no_record_is_the_event_itself() -> None:
    for kind, payload in [
        ("sr_ingested", {"properties": ["other:sr_theirs"]}),
        ("disconnected", {"property": "p"}),
        ("corrected", {"correctionId": "co_1", "reason": "sr_theirs"}),
    ]:
        given = event(kind, payload)
        assert readable_payload(given, NOTES, NAMED) is given
    readable = event("connected", {"other": "sr_mine"})
    assert readable_payload(readable, NOTES, NAMED) is readable
