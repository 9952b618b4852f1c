"""Typed edges on the compiled path: the SQL of `edges(...)`, `related(id)`, `conflicts`
and of an `Edge`'s fields, for `store.reads.compiled_sql`'s one statement per request.

Each listing is `store.kinds.edge.reads`' own (its source, filters and cursor), so both
paths read the same rows under the same visibility rule.
"""

from __future__ import annotations

from store.kinds.edge.model import conflict_sql
from store.kinds.edge.reads import (
    CONFLICT_RANK,
    conflicts_after,
    conflicts_where,
    edge_source,
    list_after,
    list_where,
)
from store.reads.compiled_sql import Compiler, EdgeRow, PageRow, RecordRow, Sel, SiteParams
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
    as_of = compiler.arg(sel.site, "as_of", "timestamptz") if shape.as_of else None
    s = compiler.alias("s")
    key = [iso(f"{s}.created_at"), f"{s}.id"]
    return _page(compiler, sel, s, page, count, "created_at, id", key, as_of)


def conflicts_root(compiler: Compiler, sel: Sel, _: None) -> str:
    """SQL: an EdgePage of the review queue, the unresolved first, each part oldest first."""
    shape = compiler.shapes[sel.site or 0]
    p = _Lanes(SiteParams(compiler, sel.site), compiler.lanes())
    where = conflicts_where(p)
    keyed = conflicts_after(p) if shape.after else ""
    limit = compiler.arg(sel.site, "limit")
    page = f"""SELECT g.*, {CONFLICT_RANK} AS rank FROM edges g WHERE {where} {keyed}
        ORDER BY {CONFLICT_RANK}, g.created_at, g.id LIMIT {limit}"""
    count = f"SELECT count(*) FROM edges g WHERE {where}"
    s = compiler.alias("s")
    key = [f"{s}.rank::text", iso(f"{s}.created_at"), f"{s}.id"]
    return _page(compiler, sel, s, page, count, "rank, created_at, id", key, None)


def _page(
    compiler: Compiler,
    sel: Sel,
    s: str,
    page: str,
    count: str,
    order: str,
    key: list[str],
    as_of: str | None,
) -> str:
    # A placeholder is numbered at its first use: only a used one may exist.
    size = f"{{size_{s}}}"
    row = PageRow(s, s, size, count, "", RecordRow({}, None), key, True, as_of)
    body = compiler.fields(sel.children, row)
    if size in body:
        body = body.replace(size, compiler.arg(sel.site, "size"))
    return (
        f"(WITH {s} AS (SELECT row_number() OVER (ORDER BY {order}) AS n, * "
        f"FROM ({page}) w) SELECT {body})"
    )


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
    shape = compiler.shapes[sel.site or 0]
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
        """SQL: an EdgePage of the edges at one end of the record, as `edges(fromId:)` or
        `edges(toId:)` pages them (`related`'s filters, the page's own first and after)."""
        shape = compiler.shapes[row.site or 0]
        p = _Lanes(SiteParams(compiler, row.site), compiler.lanes(), {end: row.ident})
        filters = (end, "namespace") if row.namespace else (end,)
        where = list_where(p, filters, False, shape.expired)
        paged = SiteParams(compiler, sel.site)
        keyed = list_after(paged) if compiler.shapes[sel.site or 0].after else ""
        page = (
            f"SELECT g.* FROM edges g WHERE {where} {keyed} "
            f"ORDER BY g.created_at, g.id LIMIT {paged('limit')}"
        )
        count = f"SELECT count(*) FROM edges g WHERE {where}"
        s = compiler.alias("s")
        key = [iso(f"{s}.created_at"), f"{s}.id"]
        return _page(compiler, sel, s, page, count, "created_at, id", key, None)

    return build


related_outgoing = _related("from_id")
related_incoming = _related("to_id")


def _end(column: str) -> Build:
    def build(compiler: Compiler, sel: Sel, row: EdgeRow) -> str:
        return _record(compiler, sel, f"{row.alias}.{column}", row.as_of)

    return build


from_record = _end("from_id")
to_record = _end("to_id")


def _record(compiler: Compiler, sel: Sel, ident: str, as_of: str | None) -> str:
    """SQL: the record `ident` names as the caller may see it then, or null."""
    r = compiler.alias("r")
    lateral, cols = compiler.record_source(r, as_of)
    return (
        f"(SELECT {compiler.fields(sel.children, RecordRow(cols, as_of))} FROM records {r} "
        f"{lateral} WHERE {r}.id = {ident} AND {RULE.record(r, compiler.lanes(), as_of)}"
        f"{compiler.alive(r, as_of)})"
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


class _Lanes(SiteParams):
    """A site's parameters, with `lanes` the statement's (the reader's), and any other
    name given its SQL in `given`."""

    def __init__(self, base: SiteParams, lanes: str, given: dict[str, str] | None = None) -> None:
        super().__init__(base.compiler, base.site)
        self._given = {"lanes": lanes, **(given or {})}

    def __call__(self, name: str, cast: str | None = None) -> str:
        given = self._given.get(name)
        return given if given is not None else super().__call__(name, cast)
