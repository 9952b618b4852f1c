"""Typed edges on the compiled path: the SQL of `edges(...)`, `related(id)`, `conflicts`
and of an `Edge`'s fields, for `store.reads.compiled_sql`'s one statement per request.

Each listing is `store.kinds.edge.queries`' own (its source, filters and cursor), so both
paths read the same rows under the same visibility rule.
"""

from __future__ import annotations

from store.kinds.edge.model import conflict_sql
from store.kinds.edge.queries import FILTERS, conflicts_sql, list_sql
from store.kinds.record.compiled import record_source
from store.kinds.record.resolve import readable_sql
from store.reads.compiled_sql import Compiler, EdgeRow, PageRow, RecordRow, Sel, SiteParams
from store.reads.json_sql import Build, iso
from store.reads.shape import Shape
from store.reads.statements import PageSql
from store.reads.visibility import RULE


def edges_root(compiler: Compiler, sel: Sel, _: None) -> str:
    """SQL: an EdgePage of `edges(...)`, oldest first, with the total count."""
    shape = compiler.shape(sel.site)
    p = SiteParams(compiler, sel.site)
    for name in ("from_id", "to_id"):
        if name in shape.filters:
            # A record retired now, named by its id, is a refusal the ordinary path words.
            q = compiler.alias("q")
            compiler.checks.append(
                f"NOT EXISTS (SELECT 1 FROM records {q} WHERE {q}.id = {p(name)} "
                f"AND {RULE.retired_now(q, compiler.lanes())})"
            )
    as_of = p("as_of", "timestamptz") if shape.as_of else None
    return _page(compiler, sel, list_sql(p, shape), "created_at, id", as_of)


def conflicts_root(compiler: Compiler, sel: Sel, _: None) -> str:
    """SQL: an EdgePage of the review queue, the unresolved first, each part oldest first."""
    shape = compiler.shape(sel.site)
    read = conflicts_sql(SiteParams(compiler, sel.site), shape)
    return _page(compiler, sel, read, "rank, created_at, id", None)


def _page(compiler: Compiler, sel: Sel, read: PageSql, order: str, as_of: str | None) -> str:
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


def related_root(compiler: Compiler, sel: Sel, _: None) -> str:
    """SQL: a Related object, the record's edges out and in (its id already whole)."""
    shape = compiler.shape(sel.site)
    ident = compiler.arg(sel.site, "id", "text")
    lanes = compiler.lanes()
    q = compiler.alias("q")
    # A record not readable now (missing, or retired) is a refusal the ordinary path words.
    compiler.checks.append(
        f"EXISTS (SELECT 1 FROM records {q} WHERE {q}.id = {ident} AND {RULE.record(q, lanes)})"
    )
    return compiler.fields(sel.children, RelatedRow(sel.site, ident, shape.namespace))


class RelatedRow:
    def __init__(self, site: int | None, ident: str, namespace: bool) -> None:
        self.site, self.ident, self.namespace = site, ident, namespace


def related_id(compiler: Compiler, sel: Sel, row: RelatedRow) -> str:
    return row.ident


def related_record(compiler: Compiler, sel: Sel, row: RelatedRow) -> str:
    return _record(compiler, sel, row.ident, None)


def _related(end: str) -> Build:
    def build(compiler: Compiler, sel: Sel, row: RelatedRow) -> str:
        """SQL: an EdgePage of the edges at one end of the record (of a note, its parts'
        too), as `related`'s ordinary path pages them (`list_sql`: `related`'s filters,
        the page's own first and after)."""
        related = compiler.shape(row.site)
        given = {end: row.ident, "lanes": compiler.lanes()}
        if row.namespace:
            given["namespace"] = compiler.arg(row.site, "namespace")
        shape = Shape(
            after=compiler.shape(sel.site).after,
            filters=tuple(f for f in FILTERS if f in given),
            expired=related.expired,
        )
        read = list_sql(SiteParams(compiler, sel.site, given), shape)
        return _page(compiler, sel, read, "created_at, id", None)

    return build


related_outgoing = _related("note_from")
related_incoming = _related("note_to")


def _end(column: str) -> Build:
    def build(compiler: Compiler, sel: Sel, row: EdgeRow) -> str:
        return _record(compiler, sel, f"{row.alias}.{column}", row.as_of)

    return build


from_record = _end("from_id")
to_record = _end("to_id")


def _record(compiler: Compiler, sel: Sel, ident: str, as_of: str | None) -> str:
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
