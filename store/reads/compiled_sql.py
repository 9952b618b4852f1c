"""One statement per query: a selection compiled into SQL that builds the response JSON.

The GraphQL layer turns a query's selection into a tree of `Sel` (response key,
API field name, children, and the builder of its SQL: a `Compiler` method or one
of the builders at the end, which each GraphQL field names as its own) and, per
request, a `Shape` for each field that takes arguments (which optional arguments
are set, how many properties a gather has).
This module turns the tree and shapes into one statement whose single row holds
`ok` and the response body as JSON text; `ok` is false when the data call for a
refusal (an ambiguous id prefix), and the caller then answers the ordinary way.

Every value reaches SQL as a parameter named `s<site>_<arg>`; lanes as `lanes`.
JSON objects are `json_build_object` (not jsonb), so keys keep the selection order.
Times are written as Python's `datetime.isoformat()` writes a UTC time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from store.kinds.correction.reads import corrections_sql
from store.kinds.record.asserted import members_sql, memberships_sql, summary_sql
from store.kinds.record.labels import labels_sql
from store.kinds.record.queries import (
    gather_sql,
    member_count_sql,
    members_shape,
    records_sql,
    versions_sql,
)
from store.kinds.record.resolve import (
    candidates_sql,
    named_sql,
    readable_sql,
    retired_sql,
    version_at_sql,
)
from store.reads.json_sql import MAX_KEYS, Build, NotCompilable, Sel, _literal, cursor, iso, obj
from store.reads.shape import GatherMode, Shape
from store.reads.statements import PageSql, Params, Statement
from store.reads.visibility import RULE

__all__ = ["MAX_KEYS", "Build", "Compiler", "NotCompilable", "Sel"]


@dataclass
class Compiler:
    """Builds one statement; `shapes` and parameter names come from the GraphQL layer, and
    each field's SQL from its `Sel` (one of the builders below)."""

    shapes: Mapping[int, Shape]
    p: Params = field(default_factory=Params)
    checks: list[str] = field(default_factory=list)
    aliases: int = 0

    def alias(self, stem: str) -> str:
        self.aliases += 1
        return f"{stem}{self.aliases}"

    def arg(self, site: int | None, name: str, cast: str | None = None) -> str:
        return self.p(f"s{site}_{name}", cast)

    def lanes(self) -> str:
        return self.p("lanes", "text[]")

    def fields(self, children: Sequence[Sel], row: object) -> str:
        """SQL: the JSON object of a selection, each field built by its own builder."""
        pairs = []
        for sel in children:
            if sel.build is None:
                raise NotCompilable(sel.name)
            pairs.append((sel.key, sel.build(self, sel, row)))
        return obj(pairs)

    # -- roots ------------------------------------------------------------------

    def statement(self, roots: Sequence[Sel]) -> Statement:
        """The statement; its row holds `ok`, `bytes` and `body`.

        The roots are built one after the other, each only while those before it hold
        at most `max_bytes` of JSON, and the body only when all of them do: a response
        over the limit is neither built whole nor sent (`body` is NULL; `bytes`, at
        most one root past the limit, says how much was built).
        """
        limit = self.p("max_bytes", "bigint")
        built = [(sel.key, self.root(sel)) for sel in roots]
        ok = " AND ".join(self.checks) or "true"
        # Named apart from the compiler's aliases (`alias`), which the values hold.
        # The first root is always built (nothing comes before it), so it is read
        # directly rather than under a LATERAL and a CASE: most operations have one root,
        # and that shape costs PostgreSQL less
        # (bench/journal/2026-12-01-run-records-page-shape-cut.md).
        # OFFSET 0 keeps each step a subquery of its own, evaluated once, in order.
        chain = (
            f"(SELECT y.v, coalesce(octet_length(y.v::text), 0)::bigint AS t "
            f"FROM (SELECT {built[0][1]} AS v OFFSET 0) y) root1"
        )
        for n, (_, value) in enumerate(built[1:], 2):
            before = f"root{n - 1}"
            chain += (
                f" CROSS JOIN LATERAL (SELECT y.v, {before}.t + "
                f"coalesce(octet_length(y.v::text), 0) AS t FROM (SELECT CASE WHEN "
                f"{before}.t <= {limit} THEN {value} END AS v OFFSET 0) y) root{n}"
            )
        total = f"root{len(built)}.t"
        data = obj([(key, f"root{n}.v") for n, (key, _) in enumerate(built, 1)])
        return self.p.statement(
            f"SELECT {ok} AS ok, {total} AS bytes, CASE WHEN {total} <= {limit} "
            f"THEN json_build_object('data', {data})::text END AS body FROM {chain}"
        )

    def root(self, sel: Sel) -> str:
        if sel.build is None:
            raise NotCompilable(sel.name)
        return sel.build(self, sel, None)

    def record_root(self, sel: Sel, _: None) -> str:
        shape = self.shapes[sel.site or 0]
        ident = self.arg(sel.site, "id")
        lanes = self.lanes()
        r = self.alias("r")
        as_of = self.arg(sel.site, "as_of", "timestamptz") if shape.as_of else None
        if shape.prefix:
            # A prefix must name at most one readable record; more is a refusal
            # (AMBIGUOUS_ID) that the ordinary path words.
            self.checks.append(
                f"(SELECT count(*) FROM ({candidates_sql(ident, lanes, as_of, 2)}) c) < 2"
            )
        # A record retired then is a refusal saying so, which the ordinary path words.
        q = self.alias("q")
        q_lateral = self.record_source(q, as_of)[0]
        self.checks.append(
            f"NOT EXISTS (SELECT 1 FROM records {q} {q_lateral} "
            f"WHERE {named_sql(q, ident, shape.prefix)} AND {retired_sql(q, lanes, as_of)})"
        )
        lateral, cols = self.record_source(r, as_of)
        return (
            f"(SELECT {self.fields(sel.children, RecordRow(cols, as_of))} FROM records {r} "
            f"{lateral} WHERE {named_sql(r, ident, shape.prefix)} "
            f"AND {readable_sql(r, lanes, as_of)} ORDER BY {r}.id LIMIT 1)"
        )

    def records_root(self, sel: Sel, _: None) -> str:
        shape = self.shapes[sel.site or 0]
        # Whole rows: the page's items need no second read of `records`.
        read = records_sql(SiteParams(self, sel.site), shape, whole_rows=True)
        return self.page(sel, read, None, by_time=True, whole_rows=True)

    def gather_root(self, sel: Sel, _: None) -> str:
        shape = self.shapes[sel.site or 0]
        p = SiteParams(self, sel.site)
        read = gather_sql(p, shape, self.alias("members"))
        as_of = p("as_of", "timestamptz") if shape.as_of else None
        return self.page(sel, read, as_of, by_time=shape.mode is GatherMode.TIMELINE)

    def edge_property_root(self, sel: Sel, _: None) -> str:
        shape = self.shapes[sel.site or 0]
        as_of = self.arg(sel.site, "as_of", "timestamptz") if shape.as_of else None
        label, value = self.arg(sel.site, "label"), self.arg(sel.site, "value")
        count = self.member_count(label, value, as_of)
        body = self.fields(sel.children, EdgePropertyRow("NULL::text", label, value, as_of))
        return (
            f"(SELECT CASE WHEN c.n = 0 THEN NULL ELSE {body} END FROM (SELECT ({count}) AS n) c)"
        )

    def labels_root(self, sel: Sel, _: None) -> str:
        shape = self.shapes[sel.site or 0]
        q = self.alias("q")
        counted = labels_sql(SiteParams(self, sel.site), shape)
        return (
            f"(SELECT coalesce(json_agg({self.fields(sel.children, q)} "
            f"ORDER BY {q}.record_count DESC, {q}.label), '[]'::json) FROM ({counted}) {q})"
        )

    # -- records ----------------------------------------------------------------

    def record_source(self, r: str, as_of: str | None) -> tuple[str, dict[str, str]]:
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

    def record_retired(self, sel: Sel, row: RecordRow) -> str:
        # A read shows no retired record (the rule, in every read above): only a write's
        # answer has a retirement, and writes other than ingest are not compiled.
        return "NULL::json"

    def record_properties(self, sel: Sel, row: RecordRow) -> str:
        return self.declared(row.cols["properties"])

    def record_metadata(self, sel: Sel, row: RecordRow) -> str:
        return RULE.metadata_json(row.cols["properties"])

    def version_metadata(self, sel: Sel, v: str) -> str:
        return RULE.metadata_json(f"{v}.state->'properties'")

    @staticmethod
    def declared(pairs: str) -> str:
        """SQL: the caller-written properties (no e_* label) as label:value strings, in order."""
        return (
            f"(SELECT coalesce(json_agg((x.p->>0) || ':' || (x.p->>1) ORDER BY x.o), '[]'::json) "
            f"FROM jsonb_array_elements({pairs}) WITH ORDINALITY AS x(p, o) "
            f"WHERE {RULE.caller_label('x.p->>0')})"
        )

    def edge_properties(self, sel: Sel, row: RecordRow) -> str:
        x = self.alias("x")
        label, value = f"({x}.p->>0)", f"({x}.p->>1)"
        ident = (
            f"'ep_' || left(encode(sha256(convert_to({row.cols['id']} || chr(31) || 'epg/1' || "
            f"chr(31) || {label} || chr(31) || {value}, 'UTF8')), 'hex'), 32)"
        )
        body = self.fields(sel.children, EdgePropertyRow(ident, label, value, row.as_of))
        # Every edge property but the adjustment chain's, in the order the record holds them.
        return (
            f"(SELECT coalesce(json_agg({body} ORDER BY {x}.o), '[]'::json) "
            f"FROM jsonb_array_elements({row.cols['properties']}) WITH ORDINALITY AS {x}(p, o) "
            f"WHERE {RULE.shown_label(f'{x}.p->>0')})"
        )

    def versions(self, sel: Sel, row: RecordRow) -> str:
        v = self.alias("v")
        # Every version up to the one shown, oldest first.
        return (
            f"(SELECT coalesce(json_agg({self.fields(sel.children, v)} ORDER BY {v}.version), "
            f"'[]'::json) FROM ({versions_sql(v, row.cols['id'], row.cols['version'])}) {v})"
        )

    def version_properties(self, sel: Sel, v: str) -> str:
        return self.declared(f"{v}.state->'properties'")

    def corrections(self, sel: Sel, row: RecordRow) -> str:
        c = self.alias("c")
        return (
            f"(SELECT coalesce(json_agg({self.fields(sel.children, c)} ORDER BY {c}.at), "
            f"'[]'::json) FROM {self.corrections_of(c, row)})"
        )

    def corrected(self, sel: Sel, row: RecordRow) -> str:
        return f"EXISTS (SELECT 1 FROM {self.corrections_of(self.alias('c'), row)})"

    def corrections_of(self, c: str, row: RecordRow) -> str:
        """SQL: the readable corrections of the record (`corrections_sql`, as the resolvers
        read them), those made by as_of if given."""
        return corrections_sql(c, row.cols["id"], self.lanes(), row.as_of)

    # -- hyperedges -------------------------------------------------------------

    def member_count(self, label: str, value: str, as_of: str | None) -> str:
        return member_count_sql(label, value, self.lanes(), as_of, self.alias("m"))

    def edge_member_count(self, sel: Sel, row: EdgePropertyRow) -> str:
        return f"({self.member_count(row.label, row.value, row.as_of)})"

    def members(self, sel: Sel, row: EdgePropertyRow | AssertedRow) -> str:
        """SQL: a RecordPage of the readable records carrying the value now (or at as_of):
        a gather of that one value, its label and value the row's."""
        shape = self.shapes[sel.site or 0]
        given = {"label_0": row.label, "value_0": row.value, "lanes": self.lanes()}
        if row.as_of is not None:
            given["as_of"] = row.as_of
        p = SiteParams(self, sel.site, given)
        read = gather_sql(p, members_shape(row.as_of is not None, shape.after), self.alias("mb"))
        return self.page(sel, read, row.as_of, by_time=False)

    # -- asserted edges ---------------------------------------------------------

    def asserted(self, sel: Sel, row: RecordRow, label: str) -> str:
        x, a = self.alias("x"), self.alias("a")
        value = f"({x}.p->>1)"
        edge = AssertedRow(a, _literal(label), value, row.as_of)
        summed = summary_sql(edge.label, value, self.lanes(), edge.as_of, self.alias("m"))
        summary = f"""SELECT {edge.label} || ':' || {value} AS id, left({value}, -33) AS hint,
              {a}s.* FROM ({summed}) {a}s"""
        return (
            f"(SELECT coalesce(json_agg({self.fields(sel.children, edge)} ORDER BY {x}.o), "
            f"'[]'::json) FROM jsonb_array_elements({row.cols['properties']}) "
            f"WITH ORDINALITY AS {x}(p, o) CROSS JOIN LATERAL ({summary}) {a} "
            f"WHERE {x}.p->>0 = {edge.label} AND {a}.n > 0)"
        )

    def memberships(self, edge: AssertedRow) -> str:
        """SQL: the edge's membership intervals (`memberships_sql`, as the resolvers read)."""
        return memberships_sql(edge.label, edge.value, self.lanes(), edge.as_of, self.alias("m"))

    def asserted_records(self, sel: Sel, edge: AssertedRow) -> str:
        """SQL: the readable records it joins (`members_sql`, as the resolvers read them)."""
        a, r = edge.alias, self.alias("r")
        lateral, cols = self.record_source(r, edge.as_of)
        body = self.fields(sel.children, RecordRow(cols, edge.as_of))
        chosen = members_sql(edge.label, edge.value, self.lanes(), edge.as_of, a, self.alias("m"))
        return f"""(SELECT coalesce(json_agg({body} ORDER BY {r}c.n), '[]'::json)
            FROM ({chosen}) {r}c JOIN records {r} ON {r}.id = {r}c.record_id {lateral}
            WHERE {readable_sql(r, self.lanes(), edge.as_of)})"""

    def history(self, sel: Sel, edge: AssertedRow) -> str:
        """SQL: each interval's joining and (if it ended) leaving, oldest first; at one
        instant, in joining order, a joining before its leaving."""
        h = self.alias("h")
        changes = f"""SELECT m.n, k.k, m.record_id,
              CASE k.k WHEN 0 THEN 'joined' ELSE 'left' END AS change,
              CASE k.k WHEN 0 THEN m.joined_at ELSE m.left_at END AS at,
              CASE k.k WHEN 0 THEN m.joined_by ELSE coalesce(m.left_by, '') END AS actor
            FROM ({self.memberships(edge)}) m CROSS JOIN (VALUES (0), (1)) k(k)
            WHERE k.k = 0 OR m.left_at IS NOT NULL"""
        return (
            f"(SELECT coalesce(json_agg({self.fields(sel.children, h)} "
            f"ORDER BY {h}.at, {h}.n, {h}.k), '[]'::json) FROM ({changes}) {h})"
        )

    # -- pages ------------------------------------------------------------------

    def page(
        self, sel: Sel, read: PageSql, as_of: str | None, by_time: bool, whole_rows: bool = False
    ) -> str:
        """SQL: a RecordPage object over `read` (rows id[, created_at], at most limit+1;
        with `whole_rows`, current `records` rows, which need no second read)."""
        s, r = self.alias("s"), self.alias("r")
        lateral, cols = self.record_source(r, as_of)
        key = [iso(f"{s}.created_at"), f"{s}.id"] if by_time else [f"{s}.id"]
        # A placeholder is numbered at its first use: only a used one may exist.
        row = PageRow(
            s, r, f"{{size_{s}}}", read.count, lateral, RecordRow(cols, as_of), key, whole_rows
        )
        order = "created_at, id" if by_time else "id"
        return self.paged(sel, read, order, row)

    def paged(self, sel: Sel, read: PageSql, order: str, row: PageRow) -> str:
        """SQL: the page object `sel` asks for, its rows `read`'s page numbered in `order`
        as `row.s` (the builders of its fields read them, and `read.count`, from `row`)."""
        body = self.fields(sel.children, row)
        if row.size in body:
            body = body.replace(row.size, self.arg(sel.site, "size"))
        ctes = f"{read.ctes}, " if read.ctes else ""
        return (
            f"(WITH {ctes}{row.s} AS (SELECT row_number() OVER (ORDER BY {order}) AS n, * "
            f"FROM ({read.page}) w) SELECT {body})"
        )

    def total_count(self, sel: Sel, row: PageRow) -> str:
        return f"({row.count})"

    def items(self, sel: Sel, row: PageRow) -> str:
        s, r, size = row.s, row.r, row.size
        body = self.fields(sel.children, row.record)
        if row.whole_rows:
            return f"""coalesce((SELECT json_agg({body} ORDER BY {r}.n)
                FROM {s} {r} WHERE {r}.n <= {size}), '[]'::json)"""
        # Records the caller may read, in the page's order; the extra row only
        # tells whether there is a next page.
        return f"""coalesce((SELECT json_agg({body} ORDER BY {s}i.n)
            FROM (SELECT * FROM {s} WHERE {s}.n <= {size}) {s}i
            JOIN records {r} ON {r}.id = {s}i.id
            {row.lateral} WHERE {readable_sql(r, self.lanes(), row.record.as_of)}), '[]'::json)"""

    def page_info(self, sel: Sel, row: PageRow) -> str:
        return self.fields(sel.children, row)

    def has_next_page(self, sel: Sel, row: PageRow) -> str:
        return f"(SELECT count(*) > {row.size} FROM {row.s})"

    def end_cursor(self, sel: Sel, row: PageRow) -> str:
        s = row.s
        return (
            f"(SELECT {row.cursor or cursor(row.key)} FROM {s} WHERE {s}.n <= {row.size} "
            f"ORDER BY {s}.n DESC LIMIT 1)"
        )


@dataclass(frozen=True)
class RecordRow:
    """A record being read: the SQL of each of its columns, and the instant it is read at."""

    cols: Mapping[str, str]
    as_of: str | None


@dataclass(frozen=True)
class EdgePropertyRow:
    ident: str
    label: str
    value: str
    as_of: str | None


@dataclass(frozen=True)
class AssertedRow:
    """An asserted edge: its value, and the alias of its summary row (`Compiler.asserted`)."""

    alias: str
    label: str
    value: str
    as_of: str | None


@dataclass(frozen=True)
class EdgeRow:
    """A typed edge being read: the alias of its row, and the instant it is read at."""

    alias: str
    as_of: str | None


@dataclass(frozen=True)
class PageRow:
    s: str  # the page's rows, numbered
    r: str
    size: str
    count: str
    lateral: str
    record: RecordRow
    key: Sequence[str]
    whole_rows: bool
    # The instant the page's items are read at (typed edges: their records then).
    as_of: str | None = None
    # The SQL of a row's cursor, when its key is no list of plain strings (`cursor`).
    cursor: str | None = None


class SiteParams(Params):
    """Params whose names are one site's (label_0, lanes, as_of...) on a shared numbering;
    a name in `given` is the SQL given for it instead (the reader's lanes, a column of the
    row read...)."""

    def __init__(
        self, compiler: Compiler, site: int | None, given: Mapping[str, str] | None = None
    ) -> None:
        super().__init__()
        self.compiler = compiler
        self.site = site
        self.given = dict(given or {})

    def __call__(self, name: str, cast: str | None = None) -> str:
        found = self.given.get(name)
        return found if found is not None else self.compiler.arg(self.site, name, cast)


# -- builders a GraphQL field names as its SQL --------------------------------


def typename(name: str) -> Build:
    """`__typename` of an object of type `name`."""
    return lambda compiler, sel, row: _literal(name)


def record_column(name: str) -> Build:
    """A record's column (as it is, or as of the instant read)."""
    return lambda compiler, sel, row: row.cols[name]


def column(name: str) -> Build:
    """A column of the row its object is read from (a ledger entry, a correction...)."""
    return lambda compiler, sel, row: f"{_alias(row)}.{name}"


def time(name: str) -> Build:
    """A time column of the row its object is read from, written as the API writes it."""
    return lambda compiler, sel, row: iso(f"{_alias(row)}.{name}")


def state(key: str) -> Build:
    """A key of the record state a ledger entry holds."""
    return lambda compiler, sel, row: f"{_alias(row)}.state->>{_literal(key)}"


def asserted_on(label: str) -> Build:
    """A record's asserted edges of one label: those it carries, in the order it holds
    them, leaving out any that no readable record was ever on."""
    return lambda compiler, sel, row: compiler.asserted(sel, row, label)


def _alias(row: object) -> str:
    return row.alias if isinstance(row, (AssertedRow, EdgeRow)) else str(row)


def edge_id(compiler: Compiler, sel: Sel, row: EdgePropertyRow) -> str:
    return row.ident


def edge_property(compiler: Compiler, sel: Sel, row: EdgePropertyRow) -> str:
    return f"{row.label} || ':' || {row.value}"


def edge_label(compiler: Compiler, sel: Sel, row: EdgePropertyRow) -> str:
    return row.label


def edge_value(compiler: Compiler, sel: Sel, row: EdgePropertyRow) -> str:
    return row.value


def nothing_listed(compiler: Compiler, sel: Sel, row: object) -> str:
    """A list no read holds (what a write noticed: only a write's answer has any)."""
    return "'[]'::json"
