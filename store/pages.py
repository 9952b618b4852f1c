"""Cursor pages: opaque cursors over a sort key, a total count, and a capped size."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
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


def decode_cursor(cursor: str | None, width: int) -> list[Any] | None:
    """The sort key a cursor stands for; a cursor from elsewhere is refused, not guessed."""
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        key = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeDecodeError):
        key = None
    # Every sort key this module encodes is a list of strings (times, ids); the times
    # are written with their zone, and one without a zone cannot be compared with them.
    if (
        not isinstance(key, list)
        or len(key) != width
        or not all(isinstance(part, str) for part in key)
        or any(_is_naive_time(part) for part in key)
    ):
        raise InvalidInputError(
            f"cursor '{cursor[:40]}' is not one this list gave out; pass an endCursor "
            "from a previous page of the same query, or omit after"
        )
    return key


def _is_naive_time(part: str) -> bool:
    try:
        return datetime.fromisoformat(part).tzinfo is None
    except ValueError:
        return False
