"""How large one write may be: checked before anything reaches the database."""

from __future__ import annotations

from store.errors import InvalidInputError, UnstorableTextError

MAX_CONTENT_CHARS = 1_000_000
MAX_PROPERTIES = 256
MAX_BATCH = 1000
# Keys are indexed per agent (a btree row holds about 2.7 kB): 256 characters of any
# width fit, and a UUID is 36.
MAX_IDEMPOTENCY_KEY_LENGTH = 256


def check_content(content: str) -> None:
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInputError(
            f"content is {len(content)} characters; at most {MAX_CONTENT_CHARS} are allowed",
            allowed=MAX_CONTENT_CHARS,
        )
    check_storable(content)


def check_count(count: int) -> None:
    if count > MAX_PROPERTIES:
        raise InvalidInputError(
            f"a record may carry at most {MAX_PROPERTIES} edge properties (this would be {count})",
            allowed=MAX_PROPERTIES,
        )


def check_batch(size: int) -> None:
    if size > MAX_BATCH:
        raise InvalidInputError(
            f"ingestMany takes at most {MAX_BATCH} records per call (got {size})",
            allowed=MAX_BATCH,
        )


def check_idempotency_key(key: str) -> None:
    if len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        raise InvalidInputError(
            f"idempotencyKey is {len(key)} characters; at most {MAX_IDEMPOTENCY_KEY_LENGTH} are "
            "allowed (a UUID is 36)",
            allowed=MAX_IDEMPOTENCY_KEY_LENGTH,
        )


def check_storable(*texts: str) -> None:
    """Refuse text PostgreSQL cannot hold: NUL, or a lone surrogate (not UTF-8)."""
    for text in texts:
        if "\x00" in text:
            raise UnstorableTextError()
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UnstorableTextError() from exc
