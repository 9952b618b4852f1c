"""Label values on the compiled path: `values(...)` and its fields as SQL building the
response, for `store.reads.compiled_sql`'s one statement per request.

The page is `store.kinds.record.reads.values`' own SQL (`values_sql`), so both paths list the
same values under the same rule; only the rendering (JSON here) differs.
"""

from __future__ import annotations

from store.kinds.record.reads.values import values_sql
from store.reads.compiled_sql import Compiler, PageRow, RecordRow, Sel, SiteParams
from store.reads.json_sql import text_cursor
from store.reads.statements import PageSql


def values_root(compiler: Compiler, sel: Sel, _: None) -> str:
    """SQL: a ValuePage, in value order (the page has no count)."""
    shape = compiler.shape(sel.site)
    read = PageSql(values_sql(SiteParams(compiler, sel.site), shape), "SELECT NULL::bigint")
    s = compiler.alias("s")
    key = [f"{s}.value_key"]
    # A value may hold any character: its cursor is JSON-escaped as the ordinary path's.
    end = text_cursor(f"{s}.value_key")
    row = PageRow(s, s, f"{{size_{s}}}", read.count, "", RecordRow({}, None), key, True, cursor=end)
    return compiler.paged(sel, read, "value_key", row)


def value_items(compiler: Compiler, sel: Sel, row: PageRow) -> str:
    """SQL: the page's values, in its order (the extra row only tells of a next page)."""
    i = compiler.alias("i")
    body = compiler.fields(sel.children, i)
    return (
        f"coalesce((SELECT json_agg({body} ORDER BY {i}.n) FROM {row.s} {i} "
        f"WHERE {i}.n <= {row.size}), '[]'::json)"
    )


def value_property(compiler: Compiler, sel: Sel, i: str) -> str:
    return f"({i}.label || ':' || {i}.value)"
