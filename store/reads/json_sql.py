"""The pieces compiled reads are built from: the tree, its shapes, and SQL for JSON values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from store.kinds.record.queries import GatherMode

# json_build_object takes at most 100 arguments: 50 keys with their values.
MAX_KEYS = 50


class NotCompilable(Exception):
    """The selection asks for something this compiler does not build."""


@dataclass(frozen=True)
class Sel:
    """One response key: the API field it reads, its argument site, its sub-selection,
    and the SQL of its value (the field's own, declared beside its GraphQL definition)."""

    key: str
    name: str
    site: int | None = None
    children: tuple[Sel, ...] = ()
    build: Build | None = None


# A field's SQL from the compiler, its selection and the row its parent object is read
# from (a record's columns, an asserted edge's aggregate, a version's ledger entry...).
Build = Callable[[Any, Sel, Any], str]


@dataclass(frozen=True)
class Shape:
    """What of a field's arguments changes the statement's text, for one request."""

    as_of: bool = False
    after: bool = False
    source_type: bool = False
    tag: bool = False
    mode: GatherMode = GatherMode.INTERSECT
    properties: int = 0
    # A record id given as a prefix rather than whole.
    prefix: bool = False
    # The optional filters given (by their parameters' names), and includeExpired.
    filters: tuple[str, ...] = ()
    expired: bool = False
    namespace: bool = False


def iso(expr: str) -> str:
    """SQL: a timestamptz as Python's isoformat() writes it in UTC (no zero microseconds)."""
    utc = f"({expr}) AT TIME ZONE 'UTC'"
    return (
        f"(to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || CASE WHEN "
        f"extract(microseconds FROM {utc})::bigint % 1000000 <> 0 "
        f"THEN to_char({utc}, '.US') ELSE '' END || '+00:00')"
    )


def cursor(parts: Sequence[str]) -> str:
    """SQL: store.reads.pages.encode_cursor of string parts (ids and times need no escaping)."""
    joined = " || '\",\"' || ".join(parts)
    text = f"'[\"' || {joined} || '\"]'"
    # base64 with the URL-safe alphabet, no line breaks and no padding.
    b64 = f"encode(convert_to({text}, 'UTF8'), 'base64')"
    return f"rtrim(translate({b64}, '+/' || chr(10), '-_'), '=')"


def obj(pairs: Sequence[tuple[str, str]]) -> str:
    if len(pairs) > MAX_KEYS:
        raise NotCompilable(f"more than {MAX_KEYS} keys in one object")
    if not pairs:
        return "json_build_object()"
    inner = ", ".join(f"{_literal(key)}, {value}" for key, value in pairs)
    return f"json_build_object({inner})"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
