"""Search on the compiled path: `search(...)` and its hits' fields as SQL building the
response, for `store.reads.compiled_sql`'s one statement per request.

The hits, their ranks, highlights and count are `store.kinds.record.search`'s own SQL
(`hits_sql`, `search_sql`), so both paths read the same rows under the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.kinds.record.resolve import readable_sql
from store.kinds.record.search import COUNT_BUDGET, SearchShape, hits_sql, search_sql
from store.reads.compiled_sql import Compiler, PageRow, RecordRow, Sel, SiteParams
from store.reads.json_sql import float_json, iso
from store.reads.shape import Shape
from store.reads.statements import PageSql

SOURCE_TYPES = "source_types"
TEXT = "text"
VECTOR = "vector:"  # and the vector's size, ":", and how many lanes it is compared in


def shape_filters(shape: SearchShape) -> tuple[str, ...]:
    """The optional parts of a search, as the compiled path's shape names them."""
    named: tuple[str, ...] = (SOURCE_TYPES,) if shape.source_types else ()
    named += (TEXT,) if shape.text else ()
    vector = f"{VECTOR}{shape.vector}:{shape.vector_lanes}"
    return named + ((vector,) if shape.vector else ())


def search_shape(shape: Shape) -> SearchShape:
    vector = [
        tuple(map(int, f.removeprefix(VECTOR).split(":")))
        for f in shape.filters
        if f.startswith(VECTOR)
    ]
    return SearchShape(
        shape.properties,
        shape.mode,
        shape.as_of,
        SOURCE_TYPES in shape.filters,
        shape.after,
        text=TEXT in shape.filters,
        vector=vector[0][0] if vector else 0,
        vector_lanes=vector[0][1] if vector else 0,
    )


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
    row = PageRow(s, r, f"{{size_{s}}}", count, lateral, RecordRow(cols, as_of), key, False, as_of)
    return compiler.paged(sel, PageSql(page, count, hits), "place", row)


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


def total_exact(compiler: Compiler, sel: Sel, row: PageRow) -> str:
    return f"(({row.count}) <= {COUNT_BUDGET})"


def hit_record(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    return compiler.fields(sel.children, row.record)


def hit_score(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    return float_json(f"{row.alias}.score")


def hit_text_rank(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    return f"{row.alias}.text_rank"


def hit_vector_rank(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    return f"{row.alias}.vector_rank"


def hit_highlights(compiler: Compiler, sel: Sel, row: HitRow) -> str:
    h = compiler.alias("h")
    body = compiler.fields(sel.children, h)
    return (
        f"(SELECT coalesce(json_agg({body} ORDER BY {h}.o), '[]'::json) "
        f"FROM json_array_elements({row.alias}.highlights) WITH ORDINALITY AS {h}(v, o))"
    )


def highlight_text(compiler: Compiler, sel: Sel, h: str) -> str:
    return f"({h}.v->>'text')"


def highlight_start(compiler: Compiler, sel: Sel, h: str) -> str:
    return f"({h}.v->'start')"


def highlight_end(compiler: Compiler, sel: Sel, h: str) -> str:
    return f"({h}.v->'end')"
