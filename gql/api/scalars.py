"""Scalars: JSON values, and DateTime that insists on a time zone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NewType

import strawberry
from strawberry.types.scalar import ScalarDefinition

JSON = NewType("JSON", object)


def _parse_datetime(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError("DateTime must be an ISO 8601 string with a time zone")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"DateTime '{value}' has no time zone; write it like 2026-01-31T09:30:00Z")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"DateTime '{value}' is out of range; in UTC it must fall within the years 1 to 9999"
        ) from None


def _serialize_datetime(value: datetime) -> str:
    return value.isoformat()


SCALARS: dict[object, ScalarDefinition] = {
    JSON: strawberry.scalar(
        name="JSON",
        description="A JSON value: object, array, string, number, boolean or null.",
        serialize=lambda v: v,
        parse_value=lambda v: v,
    ),
    datetime: strawberry.scalar(
        name="DateTime",
        description="A point in time, ISO 8601 with a time zone, e.g. 2026-01-31T09:30:00Z.",
        serialize=_serialize_datetime,
        parse_value=_parse_datetime,
    ),
}
