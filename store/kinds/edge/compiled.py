"""Typed edges on the compiled path: a page of edges and an `Edge`'s fields, for
`store.reads.compiled_sql`'s one statement per request (the reads listing them, `edges`,
`related` and `conflicts`, are `store.kinds.edge.reads`)."""

from __future__ import annotations

from store.kinds.edge.model import conflict_sql
from store.kinds.record.compiled import record_source
from store.kinds.record.resolve import readable_sql
from store.reads.compiled_sql import Compiler, EdgeRow, PageRow, RecordRow, Sel
from store.reads.json_sql import Build, iso
from store.reads.statements import PageSql


def edge_page_sql(
    compiler: Compiler, sel: Sel, read: PageSql, order: str, as_of: str | None
) -> str:
    """SQL: an EdgePage over `read`'s rows, numbered in `order` (its cursor's key)."""
    s = compiler.alias("s")
    key = [
        iso(f"{s}.{column}") if column == "created_at" else f"{s}.{column}::text"
        for column in order.split(", ")
    ]
    # A placeholder is numbered at its first use: only a used one may exist.
    row = PageRow(s, s, f"{{size_{s}}}", read.count, "", RecordRow({}, None), key, True, as_of)
    return compiler.paged(sel, read, order, row)


def edge_items(compiler: Compiler, sel: Sel, row: PageRow) -> str:
    """SQL: the page's edges, in its order (the extra row only tells of a next page)."""
    i = compiler.alias("i")
    body = compiler.fields(sel.children, EdgeRow(i, row.as_of))
    return (
        f"coalesce((SELECT json_agg({body} ORDER BY {i}.n) FROM {row.s} {i} "
        f"WHERE {i}.n <= {row.size}), '[]'::json)"
    )


def _end(column: str) -> Build:
    def build(compiler: Compiler, sel: Sel, row: EdgeRow) -> str:
        return record_at(compiler, sel, f"{row.alias}.{column}", row.as_of)

    return build


from_record = _end("from_id")
to_record = _end("to_id")


def record_at(compiler: Compiler, sel: Sel, ident: str, as_of: str | None) -> str:
    """SQL: the record `ident` names as the caller may see it then, or null."""
    r = compiler.alias("r")
    lateral, cols = record_source(compiler, r, as_of)
    return (
        f"(SELECT {compiler.fields(sel.children, RecordRow(cols, as_of))} FROM records {r} "
        f"{lateral} WHERE {r}.id = {ident} AND {readable_sql(r, compiler.lanes(), as_of)})"
    )


def number(name: str) -> Build:
    """A float column written as Python writes a float (1.0, not 1)."""

    def build(compiler: Compiler, sel: Sel, row: EdgeRow) -> str:
        v = f"{row.alias}.{name}"
        return (
            f"(CASE WHEN {v} IS NULL THEN NULL WHEN {v} = trunc({v}) "
            f"THEN ({v}::text || '.0')::json ELSE {v}::text::json END)"
        )

    return build


def evidence(compiler: Compiler, sel: Sel, row: EdgeRow) -> str:
    return f"{row.alias}.evidence::json"


def conflict_state(compiler: Compiler, sel: Sel, row: EdgeRow) -> str:
    return conflict_sql(row.alias)
