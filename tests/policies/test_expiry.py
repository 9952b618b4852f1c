"""A record's expiry as the guard decides it, and a lane's lifetime as the loader reads it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from policies.errors import ExpiryError, PolicyLoadError
from policies.guard import NO_EXPIRY, Expiry, decide_expiry, lane_expiry
from policies.loader import load_policy
from policies.model import Lane, parse_duration

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "duration"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("15m", timedelta(minutes=15)),
        (" 1d ", timedelta(days=1)),
        ("36500d", timedelta(days=36_500)),
    ],
)
def test_a_lifetime_is_days_hours_or_minutes(text: str, duration: timedelta) -> None:
    assert parse_duration(text) == duration


@pytest.mark.parametrize(
    "text", ["", "30", "d", "0d", "30s", "1w", "-1d", "1.5h", "36501d", "30 d"]
)
def test_any_other_lifetime_is_none(text: str) -> None:
    assert parse_duration(text) is None


def test_a_lane_s_ttl_is_loaded_and_a_bad_one_refused_naming_the_forms() -> None:
    policy = load_policy("lanes: {notes: {ttl: 30d}, crm: {source_types: {a: {}}, ttl: 12h}}")
    assert policy.lane("notes").ttl == timedelta(days=30)
    assert policy.lane("crm").ttl == timedelta(hours=12)
    assert load_policy("lanes: {notes: {}}").lane("notes").ttl is None
    for bad in ("30x", "30", "true", "[30d]"):
        with pytest.raises(PolicyLoadError) as refused:
            load_policy(f"lanes: {{notes: {{ttl: {bad}}}}}")
        assert refused.value.key == "lanes.notes.ttl"
        assert "30d" in refused.value.message and "12h" in refused.value.message
        assert "15m" in refused.value.message
        assert refused.value.allowed is not None and len(refused.value.allowed) == 3


def test_an_expiry_must_come_after_the_write_unless_asked_at_once() -> None:
    later = NOW + timedelta(hours=1)
    assert decide_expiry(NOW, Expiry(later)) == later
    assert decide_expiry(NOW, NO_EXPIRY) is None
    assert decide_expiry(NOW, NO_EXPIRY, kept=later) == later  # an update keeps it
    for past in (NOW, NOW - timedelta(seconds=1)):
        with pytest.raises(ExpiryError) as refused:
            decide_expiry(NOW, Expiry(past))
        assert "expireNow: true" in refused.value.message
        assert refused.value.allowed == ["an instant after now", "expireNow: true"]
        # Asked at once: now, never the past instant (earlier reads stay as they were).
        assert decide_expiry(NOW, Expiry(past, now=True)) == NOW
    assert decide_expiry(NOW, Expiry(now=True)) == NOW
    with pytest.raises(ExpiryError) as contradicted:
        decide_expiry(NOW, Expiry(later, now=True))
    assert "expireNow expires the record at once" in contradicted.value.message


def test_a_new_record_takes_its_lane_s_lifetime_unless_it_asks_its_own() -> None:
    lane = Lane("notes", ttl=timedelta(days=30))
    assert lane_expiry(lane, NOW, NO_EXPIRY) == NOW + timedelta(days=30)
    assert lane_expiry(lane, NOW, Expiry(NOW + timedelta(hours=1))) == NOW + timedelta(hours=1)
    assert lane_expiry(lane, NOW, Expiry(now=True)) == NOW
    assert lane_expiry(Lane("open"), NOW, NO_EXPIRY) is None
