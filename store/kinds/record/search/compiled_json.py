"""Search on the compiled path: `search(...)` and its hits' fields as SQL building the
response, for `store.reads.compiled_sql`'s one statement per request.

The page itself is the search read's (`store.kinds.record.reads.search`); its hits, their
ranks, highlights and count are `store.kinds.record.search`'s own SQL (`statement`'s
`hits_sql` and `search_sql`, `highlights`), after the same plan, so both paths read the same rows
under the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.kinds.record.resolve import readable_sql
from store.kinds.record.search.arguments import SearchShape
from store.kinds.record.search.highlights import highlights_sql, version_content_sql
from store.kinds.record.search.hints import NO_VECTOR_HIT
from store.kinds.record.search.planner import COUNT_BUDGET
from store.reads.compiled_sql import Compiler, PageRow, RecordRow, Sel
from store.reads.json_sql import float_json


def search_shape(shape: object) -> SearchShape:
    """The search's own shape, as its binder gave it (`store.kinds.record.reads.search`)."""
    assert isinstance(shape, SearchShape)
    return shape


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
