"""Typed edges on the compiled path: the SQL of `edges(...)` and of an `Edge`'s fields,
for `store.reads.compiled_sql`'s one statement per request.

The listing is `store.kinds.edge.reads`' own (its source, filters and cursor), so both
paths read the same rows under the same visibility rule.
"""

from __future__ import annotations

from store.kinds.edge.reads import edge_source, list_after, list_where
from store.reads.compiled_sql import Compiler, PageRow, RecordRow, Sel, SiteParams
from store.reads.json_sql import Build, iso
from store.reads.visibility import RULE


def edges_root(compiler: Compiler, sel: Sel, _: None) -> str:
    """SQL: an EdgePage of `edges(...)`, oldest first, with the total count."""
    shape = compiler.shapes[sel.site or 0]
    p = SiteParams(compiler, sel.site)
    lanes = compiler.lanes()
    # The reader's lanes are the statement's, not the site's.
    where = list_where(_Lanes(p, lanes), shape.filters, shape.as_of, shape.expired)
    keyed = list_after(p) if shape.after else ""
    for name in ("from_id", "to_id"):
        if name in shape.filters:
            # A record retired now, named by its id, is a refusal the ordinary path words.
            q = compiler.alias("q")
            compiler.checks.append(
                f"NOT EXISTS (SELECT 1 FROM records {q} WHERE {q}.id = {p(name)} "
                f"AND {RULE.retired_now(q, lanes)})"
            )
    source = edge_source(p, shape.as_of)
    limit = compiler.arg(sel.site, "limit")
    page = (
        f"SELECT g.* FROM {source} WHERE {where} {keyed} ORDER BY g.created_at, g.id LIMIT {limit}"
    )
    count = f"SELECT count(*) FROM {edge_source(p, shape.as_of)} WHERE {where}"
    s = compiler.alias("s")
    # A placeholder is numbered at its first use: only a used one may exist.
    size = f"{{size_{s}}}"
    key = [iso(f"{s}.created_at"), f"{s}.id"]
    row = PageRow(s, s, size, count, "", RecordRow({}, None), key, whole_rows=True)
    body = compiler.fields(sel.children, row)
    if size in body:
        body = body.replace(size, compiler.arg(sel.site, "size"))
    return (
        f"(WITH {s} AS (SELECT row_number() OVER (ORDER BY created_at, id) AS n, * "
        f"FROM ({page}) w) SELECT {body})"
    )


def edge_items(compiler: Compiler, sel: Sel, row: PageRow) -> str:
    """SQL: the page's edges, in its order (the extra row only tells of a next page)."""
    i = compiler.alias("i")
    body = compiler.fields(sel.children, i)
    return (
        f"coalesce((SELECT json_agg({body} ORDER BY {i}.n) FROM {row.s} {i} "
        f"WHERE {i}.n <= {row.size}), '[]'::json)"
    )


def number(name: str) -> Build:
    """A float column written as Python writes a float (1.0, not 1)."""

    def build(compiler: Compiler, sel: Sel, row: object) -> str:
        v = f"{row}.{name}"
        return (
            f"(CASE WHEN {v} IS NULL THEN NULL WHEN {v} = trunc({v}) "
            f"THEN ({v}::text || '.0')::json ELSE {v}::text::json END)"
        )

    return build


def evidence(compiler: Compiler, sel: Sel, row: object) -> str:
    return f"{row}.evidence::json"


class _Lanes(SiteParams):
    """A site's parameters, with `lanes` the statement's (the reader's)."""

    def __init__(self, base: SiteParams, lanes: str) -> None:
        super().__init__(base.compiler, base.site)
        self._lanes = lanes

    def __call__(self, name: str, cast: str | None = None) -> str:
        return self._lanes if name == "lanes" else super().__call__(name, cast)
