"""Label values on the compiled path: the fields of a `values(...)` page as SQL building
the response, for `store.reads.compiled_sql`'s one statement per request.

The page is the values read's (`store.kinds.record.reads.values`), its own SQL
(`values_sql`), so both paths list the same values under the same rule; only the
rendering (JSON here) differs.
"""

from __future__ import annotations

from store.reads.compiled_sql import Compiler, PageRow, Sel


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
