"""The pieces compiled reads are built from: the tree, and SQL for JSON values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

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


def float_json(v: str) -> str:
    """SQL: a double as JSON written as Python writes a float (1.0, not 1)."""
    return (
        f"(CASE WHEN {v} IS NULL THEN NULL WHEN {v} = trunc({v}) "
        f"THEN ({v}::text || '.0')::json ELSE {v}::text::json END)"
    )


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
    return _base64(f"'[\"' || {joined} || '\"]'")


def text_cursor(part: str) -> str:
    """SQL: store.reads.pages.encode_cursor of one string, whatever it holds."""
    return _base64(f"'[' || {json_ascii(part)} || ']'")


def json_ascii(expr: str) -> str:
    """SQL: the text as Python's json.dumps writes it: PostgreSQL's JSON string with every
    character past ASCII as \\u escapes (a pair of surrogates past the BMP)."""
    code = "ascii(t.ch)"
    astral = f"{code} - 65536"
    return f"""(SELECT string_agg(CASE WHEN {code} < 128 THEN t.ch
          WHEN {code} < 65536 THEN '\\u' || lpad(to_hex({code}), 4, '0')
          ELSE '\\u' || to_hex(55296 + (({astral}) >> 10))
            || '\\u' || to_hex(56320 + (({astral}) & 1023)) END, '' ORDER BY t.o)
        FROM regexp_split_to_table(to_json(({expr})::text)::text, '') WITH ORDINALITY
          AS t(ch, o))"""


def _base64(text: str) -> str:
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
