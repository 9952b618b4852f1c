"""Search on the compiled path: `search(...)` and its hits' fields as SQL building the
response, for `store.reads.compiled_sql`'s one statement per request.

The hits, their ranks, highlights and count are `store.kinds.record.search`'s own SQL
(`hits_sql`, `search_sql`, `highlights_sql`), after the same plan (`read_plan`), so both
paths read the same rows under the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.kinds.record.resolve import readable_sql
from store.kinds.record.search import (
    COUNT_BUDGET,
    NO_VECTOR_HIT,
    SearchShape,
    highlights_sql,
    hits_sql,
    plan_text,
    search_sql,
    version_content_sql,
)
from store.reads.compiled_sql import Compiler, PageRow, RecordRow, Sel, SiteParams
from store.reads.json_sql import float_json, iso
from store.reads.shape import Shape
from store.reads.snapshot import Reader
from store.reads.statements import PageSql


def search_shape(shape: Shape) -> SearchShape:
    """The search's own shape, as its binder gave it (`gql.api.compiled.plan`)."""
    assert isinstance(shape.own, SearchShape)
    return shape.own


async def read_plan(db: Reader, prefix: str, values: dict[str, Any]) -> None:
    """Plan the search's text as the resolver does, on the request's snapshot, and put
    the plan's values in `values` under the site's `prefix`."""
    if prefix + "text" in values:
        await plan_text(db, values, prefix)


def search_root(compiler: Compiler, sel: Sel, _: None) -> str:
    """SQL: a SearchPage, best first, with the exact count."""
    shape = search_shape(compiler.shapes[sel.site or 0])
    p = SiteParams(compiler, sel.site)
    hits = hits_sql(p, shape)
    page, count = search_sql(p, shape)
    as_of = compiler.arg(sel.site, "as_of", "timestamptz") if shape.as_of else None
    s, r = compiler.alias("s"), compiler.alias("r")
    lateral, cols = compiler.record_source(r, as_of)
    key = [f"{s}.score_key", iso(f"{s}.since"), f"{s}.id"]
    # A placeholder is numbered at its first use: only a used one may exist.
    row = SearchPageRow(
        s,
        r,
        f"{{size_{s}}}",
        count,
        lateral,
        RecordRow(cols, as_of),
        key,
        False,
        as_of,
        site=sel.site,
    )
    return compiler.paged(sel, PageSql(page, count, hits), "place", row)


@dataclass(frozen=True)
class SearchPageRow(PageRow):
    """A page of hits being read, and its site (the plan's values are its parameters)."""

    site: int | None = None


@dataclass(frozen=True)
class HitRow:
    """A hit being read: the alias of its page row, and its record's columns."""

    alias: str
    record: RecordRow


def search_items(compiler: Compiler, sel: Sel, row: PageRow) -> str:
    """SQL: the page's hits, best first, each with its record as read (the extra row only
    tells of a next page)."""
    s, r, i = row.s, row.r, compiler.alias("i")
    body = compiler.fields(sel.children, HitRow(i, row.record))
    return f"""coalesce((SELECT json_agg({body} ORDER BY {i}.n)
        FROM (SELECT * FROM {s} WHERE {s}.n <= {row.size}) {i}
        JOIN records {r} ON {r}.id = {i}.id
        {row.lateral} WHERE {readable_sql(r, compiler.lanes(), row.as_of)}), '[]'::json)"""


def search_total(compiler: Compiler, sel: Sel, row: PageRow) -> str:
    return f"least(({row.count}), {COUNT_BUDGET})"


def total_exact(compiler: Compiler, sel: Sel, row: SearchPageRow) -> str:
    exact = f"(({row.count}) <= {COUNT_BUDGET})"
    if search_shape(compiler.shapes[row.site or 0]).text:
        exact = f"({exact} AND {compiler.arg(row.site, 'text_complete', 'boolean')})"
    return exact


def search_terms(compiler: Compiler, sel: Sel, row: SearchPageRow) -> str:
    return _plan_list(compiler, row, "terms")


def search_dropped(compiler: Compiler, sel: Sel, row: SearchPageRow) -> str:
    return _plan_list(compiler, row, "dropped")


def _plan_list(compiler: Compiler, row: SearchPageRow, name: str) -> str:
    if not search_shape(compiler.shapes[row.site or 0]).text:
        return "'[]'::json"
    return f"to_json({compiler.arg(row.site, name, 'text[]')})"


def search_hint(compiler: Compiler, sel: Sel, row: SearchPageRow) -> str:
    """The hint, on a first page that found nothing."""
    shape = search_shape(compiler.shapes[row.site or 0])
    if shape.after:
        return "NULL::text"
    hint = compiler.arg(row.site, "hint", "text") if shape.text else _literal(NO_VECTOR_HIT)
    return f"(SELECT {hint} WHERE NOT EXISTS (SELECT 1 FROM {row.s}))"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'::text"


def hit_record(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    return compiler.fields(sel.children, row.record)


def hit_score(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    return float_json(f"{row.alias}.score")


def hit_text_rank(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    return f"{row.alias}.text_rank"


def hit_vector_rank(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    return f"{row.alias}.vector_rank"


def hit_matched(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    return f"to_json({row.alias}.matched)"


def hit_highlights(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    """SQL: the hit's highlights, computed here, for the hits of the page that ask."""
    h, i = compiler.alias("h"), row.alias
    body = compiler.fields(sel.children, h)
    marks = highlights_sql(version_content_sql(i), f"{i}.config", f"{i}.query")
    return (
        f"(SELECT coalesce(json_agg({body} ORDER BY {h}.o), '[]'::json) "
        f"FROM json_array_elements({marks}) WITH ORDINALITY AS {h}(v, o))"
    )


def highlight_text(compiler: Compiler, sel: Sel, h: str) -> str:
    return f"({h}.v->>'text')"


def highlight_start(compiler: Compiler, sel: Sel, h: str) -> str:
    return f"({h}.v->'start')"


def highlight_end(compiler: Compiler, sel: Sel, h: str) -> str:
    return f"({h}.v->'end')"
