"""One statement per query: a selection compiled into SQL that builds the response JSON.

The GraphQL layer turns a query's selection into a tree of `Sel` (response key,
API field name, children, and the builder of its SQL: a `Compiler` method or one
of the builders at the end, which each GraphQL field names as its own) and, per
request, a shape for each field that takes arguments (which optional arguments
are set, how many properties a gather has).
This module turns the tree and shapes into one statement whose single row holds
`ok` and the response body as JSON text; `ok` is false when the data call for a
refusal (an ambiguous id prefix), and the caller then answers the ordinary way.

Every value reaches SQL as a parameter named `s<site>_<arg>`; lanes as `lanes`.
JSON objects are `json_build_object` (not jsonb), so keys keep the selection order.
Times are written as Python's `datetime.isoformat()` writes a UTC time.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from store.reads.json_sql import MAX_KEYS, Build, NotCompilable, Sel, _literal, cursor, iso, obj
from store.reads.statements import PageSql, Params, Statement
from store.reads.visibility import RULE

__all__ = ["MAX_KEYS", "Build", "Compiler", "NotCompilable", "Sel"]


@dataclass
class Compiler:
    """Builds one statement; `shapes` and parameter names come from the GraphQL layer, and
    each field's SQL from its `Sel` (one of the builders below)."""

    # Each site's shape: a type of its own per read (`store.reads.registry`).
    shapes: Mapping[int, Hashable]
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

    # -- records ----------------------------------------------------------------

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

    def version_properties(self, sel: Sel, v: str) -> str:
        return self.declared(f"{v}.state->'properties'")

    # -- pages ------------------------------------------------------------------

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
