"""The record kind's part of the compiled path: a record's columns as of an instant, pages
of records, and the builders of the fields a record and its edges answer (versions,
corrections, asserted edges, hyperedge members), over the generic compiler
(`store.reads.compiled_sql`), which names no kind."""

from __future__ import annotations

from store.kinds.correction.reads import corrections_sql
from store.kinds.record.asserted import members_sql, memberships_sql, summary_sql
from store.kinds.record.queries import member_count_sql, versions_sql
from store.kinds.record.resolve import readable_sql, version_at_sql
from store.reads.compiled_sql import (
    AssertedRow,
    Compiler,
    EdgePropertyRow,
    PageRow,
    RecordRow,
    Sel,
)
from store.reads.json_sql import Build, _literal, iso
from store.reads.statements import PageSql
from store.reads.visibility import RULE


def record_source(compiler: Compiler, r: str, as_of: str | None) -> tuple[str, dict[str, str]]:
    """What joins `records {r}` to give a record as of `as_of` (nothing, for now), and
    the expression of each of its columns."""
    cols = {
        "id": f"{r}.id",
        "created_at": iso(f"{r}.created_at"),
        "created_by": f"{r}.created_by",
    }
    if as_of is None:
        cols.update(
            lane=f"{r}.lane",
            source_type=f"{r}.source_type",
            authority=f"{r}.authority",
            content=f"{r}.content",
            version=f"{r}.version",
            updated_at=iso(f"{r}.updated_at"),
            properties=f"{r}.properties",
            expires_at=iso(f"{r}.{RULE.expiry}"),
        )
        return "", cols
    v = f"{r}v"
    cols.update(
        lane=f"{v}.state->>'lane'",
        source_type=f"{v}.state->>'source_type'",
        authority=f"{v}.state->>'authority'",
        content=f"{v}.state->>'content'",
        version=f"{v}.version",
        updated_at=iso(f"{v}.at"),
        properties=f"{v}.state->'properties'",
        expires_at=iso(f"({v}.state->>'{RULE.expiry}')::timestamptz"),
    )
    # The newest version written by as_of (none: the record did not exist yet).
    return version_at_sql(r, as_of), cols


def page(
    compiler: Compiler,
    sel: Sel,
    read: PageSql,
    as_of: str | None,
    by_time: bool,
    whole_rows: bool = False,
) -> str:
    """SQL: a RecordPage object over `read` (rows id[, created_at], at most limit+1;
    with `whole_rows`, current `records` rows, which need no second read)."""
    s, r = compiler.alias("s"), compiler.alias("r")
    lateral, cols = record_source(compiler, r, as_of)
    key = [iso(f"{s}.created_at"), f"{s}.id"] if by_time else [f"{s}.id"]
    # A placeholder is numbered at its first use: only a used one may exist.
    row = PageRow(
        s, r, f"{{size_{s}}}", read.count, lateral, RecordRow(cols, as_of), key, whole_rows
    )
    order = "created_at, id" if by_time else "id"
    return compiler.paged(sel, read, order, row)


def items(compiler: Compiler, sel: Sel, row: PageRow) -> str:
    """SQL: a RecordPage's records."""
    s, r, size = row.s, row.r, row.size
    body = compiler.fields(sel.children, row.record)
    if row.whole_rows:
        return f"""coalesce((SELECT json_agg({body} ORDER BY {r}.n)
            FROM {s} {r} WHERE {r}.n <= {size}), '[]'::json)"""
    # Records the caller may read, in the page's order; the extra row only
    # tells whether there is a next page.
    return f"""coalesce((SELECT json_agg({body} ORDER BY {s}i.n)
        FROM (SELECT * FROM {s} WHERE {s}.n <= {size}) {s}i
        JOIN records {r} ON {r}.id = {s}i.id
        {row.lateral} WHERE {readable_sql(r, compiler.lanes(), row.record.as_of)}), '[]'::json)"""


# -- a record's fields ---------------------------------------------------------


def versions(compiler: Compiler, sel: Sel, row: RecordRow) -> str:
    v = compiler.alias("v")
    # Every version up to the one shown, oldest first.
    return (
        f"(SELECT coalesce(json_agg({compiler.fields(sel.children, v)} ORDER BY {v}.version), "
        f"'[]'::json) FROM ({versions_sql(v, row.cols['id'], row.cols['version'])}) {v})"
    )


def corrections(compiler: Compiler, sel: Sel, row: RecordRow) -> str:
    c = compiler.alias("c")
    return (
        f"(SELECT coalesce(json_agg({compiler.fields(sel.children, c)} ORDER BY {c}.at), "
        f"'[]'::json) FROM {_corrections_of(compiler, c, row)})"
    )


def corrected(compiler: Compiler, sel: Sel, row: RecordRow) -> str:
    return f"EXISTS (SELECT 1 FROM {_corrections_of(compiler, compiler.alias('c'), row)})"


def _corrections_of(compiler: Compiler, c: str, row: RecordRow) -> str:
    """SQL: the readable corrections of the record (`corrections_sql`, as the resolvers
    read them), those made by as_of if given."""
    return corrections_sql(c, row.cols["id"], compiler.lanes(), row.as_of)


# -- hyperedges ----------------------------------------------------------------


def member_count(compiler: Compiler, label: str, value: str, as_of: str | None) -> str:
    return member_count_sql(label, value, compiler.lanes(), as_of, compiler.alias("m"))


def edge_member_count(compiler: Compiler, sel: Sel, row: EdgePropertyRow) -> str:
    return f"({member_count(compiler, row.label, row.value, row.as_of)})"


# -- asserted edges ------------------------------------------------------------


def asserted(compiler: Compiler, sel: Sel, row: RecordRow, label: str) -> str:
    x, a = compiler.alias("x"), compiler.alias("a")
    value = f"({x}.p->>1)"
    edge = AssertedRow(a, _literal(label), value, row.as_of)
    summed = summary_sql(edge.label, value, compiler.lanes(), edge.as_of, compiler.alias("m"))
    summary = f"""SELECT {edge.label} || ':' || {value} AS id, left({value}, -33) AS hint,
          {a}s.* FROM ({summed}) {a}s"""
    return (
        f"(SELECT coalesce(json_agg({compiler.fields(sel.children, edge)} ORDER BY {x}.o), "
        f"'[]'::json) FROM jsonb_array_elements({row.cols['properties']}) "
        f"WITH ORDINALITY AS {x}(p, o) CROSS JOIN LATERAL ({summary}) {a} "
        f"WHERE {x}.p->>0 = {edge.label} AND {a}.n > 0)"
    )


def asserted_on(label: str) -> Build:
    """A record's asserted edges of one label: those it carries, in the order it holds
    them, leaving out any that no readable record was ever on."""
    return lambda compiler, sel, row: asserted(compiler, sel, row, label)


def _memberships(compiler: Compiler, edge: AssertedRow) -> str:
    """SQL: the edge's membership intervals (`memberships_sql`, as the resolvers read)."""
    lanes = compiler.lanes()
    return memberships_sql(edge.label, edge.value, lanes, edge.as_of, compiler.alias("m"))


def asserted_records(compiler: Compiler, sel: Sel, edge: AssertedRow) -> str:
    """SQL: the readable records it joins (`members_sql`, as the resolvers read them)."""
    a, r = edge.alias, compiler.alias("r")
    lanes = compiler.lanes()
    lateral, cols = record_source(compiler, r, edge.as_of)
    body = compiler.fields(sel.children, RecordRow(cols, edge.as_of))
    chosen = members_sql(edge.label, edge.value, lanes, edge.as_of, a, compiler.alias("m"))
    return f"""(SELECT coalesce(json_agg({body} ORDER BY {r}c.n), '[]'::json)
        FROM ({chosen}) {r}c JOIN records {r} ON {r}.id = {r}c.record_id {lateral}
        WHERE {readable_sql(r, lanes, edge.as_of)})"""


def history(compiler: Compiler, sel: Sel, edge: AssertedRow) -> str:
    """SQL: each interval's joining and (if it ended) leaving, oldest first; at one
    instant, in joining order, a joining before its leaving."""
    h = compiler.alias("h")
    changes = f"""SELECT m.n, k.k, m.record_id,
          CASE k.k WHEN 0 THEN 'joined' ELSE 'left' END AS change,
          CASE k.k WHEN 0 THEN m.joined_at ELSE m.left_at END AS at,
          CASE k.k WHEN 0 THEN m.joined_by ELSE coalesce(m.left_by, '') END AS actor
        FROM ({_memberships(compiler, edge)}) m CROSS JOIN (VALUES (0), (1)) k(k)
        WHERE k.k = 0 OR m.left_at IS NOT NULL"""
    return (
        f"(SELECT coalesce(json_agg({compiler.fields(sel.children, h)} "
        f"ORDER BY {h}.at, {h}.n, {h}.k), '[]'::json) FROM ({changes}) {h})"
    )
