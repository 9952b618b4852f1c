"""Cursor pages: opaque cursors over a sort key, a total count, and a capped size."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from store.errors import InvalidInputError

T = TypeVar("T")

DEFAULT_PAGE = 50
MAX_PAGE = 500


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    # None when the caller did not ask for it: counting a long list costs more than its page.
    total_count: int | None
    has_next_page: bool
    end_cursor: str | None


def page_size(first: int | None) -> int:
    if first is None:
        return DEFAULT_PAGE
    if first < 1 or first > MAX_PAGE:
        raise InvalidInputError(
            f"first must be between 1 and {MAX_PAGE} (got {first})", allowed=[1, MAX_PAGE]
        )
    return first


def encode_cursor(key: Sequence[Any]) -> str:
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def id_cursor(cursor: str | None) -> str | None:
    """The id after which a page sorted by id goes on (None: from the start)."""
    key = _key(cursor, 1)
    return None if key is None else key[0]


def time_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """The (time, id) after which a page sorted by time and id goes on (None: from the
    start). The time is one PostgreSQL can hold: with its zone, and within years 1 to
    9999 in UTC as every time this module encodes is."""
    key = _key(cursor, 2)
    if key is None:
        return None
    try:
        at = datetime.fromisoformat(key[0])
        if at.tzinfo is None:
            raise ValueError("a time without a zone cannot be compared with the stored ones")
        at.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise _refusal(cursor or "") from exc
    return at, key[1]


def key_cursor(cursor: str | None, width: int) -> list[str] | None:
    """The sort key of `width` strings a cursor stands for (None: from the start)."""
    return _key(cursor, width)


# A feed position is a bigint: 18 ASCII digits always fit. Not str.isdigit(), which
# also takes superscripts and other scripts' digits.
_POSITION = re.compile("[0-9]{1,18}")


def position_cursor(cursor: str) -> int:
    """The feed position an event cursor names (`audit`, `auditEvents`); "0" is the start."""
    if _POSITION.fullmatch(cursor) is None:
        raise InvalidInputError(
            f"cursor '{cursor[:40]}' is not a feed cursor: a cursor is an event's position "
            "in the feed, 1 to 18 ASCII digits (0-9), as an event's cursor or a page's "
            'endCursor gives it, or "0" for the start of the feed'
        )
    return int(cursor)


def _key(cursor: str | None, width: int) -> list[str] | None:
    """The sort key a cursor stands for; a cursor from elsewhere is refused, not guessed."""
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        key = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeError):
        key = None
    # Every sort key this module encodes is a list of strings (times, ids) that
    # PostgreSQL stores: no NUL, no lone surrogate.
    if (
        not isinstance(key, list)
        or len(key) != width
        or not all(isinstance(part, str) and _storable(part) for part in key)
    ):
        raise _refusal(cursor)
    return key


def _storable(part: str) -> bool:
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in part


def _refusal(cursor: str) -> InvalidInputError:
    return InvalidInputError(
        f"cursor '{cursor[:40]}' is not one this list gave out: a cursor is a page's "
        "endCursor, passed back unchanged; pass an endCursor from a previous page of the same "
        "query, or omit after"
    )


def bind_page(values: dict[str, Any], prefix: str, first: int | None) -> None:
    """A page's size (checked) and the rows its statement reads (one more, which tells
    whether a next page follows), under `prefix`."""
    size = page_size(first)
    values[prefix + "size"], values[prefix + "limit"] = size, size + 1
