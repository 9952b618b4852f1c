"""One statement per query: a selection compiled into SQL that builds the response JSON.

The GraphQL layer turns a query's selection into a tree of `Sel` (response key,
API field name, children) and, per request, a `Shape` for each field that takes
arguments (which optional arguments are set, how many properties a gather has).
This module turns the tree and shapes into one statement whose single row holds
`ok` and the response body as JSON text; `ok` is false when the data call for a
refusal (an ambiguous id prefix), and the caller then answers the ordinary way.

Every value reaches SQL as a parameter named `s<site>_<arg>`; lanes as `lanes`.
JSON objects are `json_build_object` (not jsonb), so keys keep the selection order.
Times are written as Python's `datetime.isoformat()` writes a UTC time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from store._json_sql import MAX_KEYS, NotCompilable, Sel, Shape, cursor, iso, obj
from store._sql import Params, Statement
from store.queries import GatherMode, carries, member_at, members_sql

__all__ = ["MAX_KEYS", "Compiler", "NotCompilable", "Sel", "Shape"]


@dataclass
class Compiler:
    """Builds one statement; `shapes` and parameter names come from the GraphQL layer."""

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
        chain = "(SELECT 0::bigint AS t) root0"
        for n, (_, value) in enumerate(built, 1):
            before = f"root{n - 1}"
            # OFFSET 0 keeps each step a subquery of its own, evaluated once, in order.
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
        build: dict[str, Callable[[Sel], str]] = {
            "__typename": lambda s: "'Query'",
            "record": self.record_root,
            "records": self.records_root,
            "gather": self.gather_root,
            "edgeProperty": self.edge_property_root,
        }
        if sel.name not in build:
            raise NotCompilable(sel.name)
        return build[sel.name](sel)

    def record_root(self, sel: Sel) -> str:
        shape = self.shapes[sel.site or 0]
        ident = self.arg(sel.site, "id")
        lanes = self.lanes()
        r = self.alias("r")
        if shape.prefix:
            # A prefix must name at most one readable record; more is a refusal
            # (AMBIGUOUS_ID) that the ordinary path words.
            self.checks.append(
                f"(SELECT count(*) FROM (SELECT 1 FROM records WHERE id >= {ident} "
                f"AND id < {ident} || 'g' AND lane = ANY({lanes}) LIMIT 2) c) < 2"
            )
            where = f"{r}.id >= {ident} AND {r}.id < {ident} || 'g'"
        else:
            where = f"{r}.id = {ident}"
        as_of = self.arg(sel.site, "as_of", "timestamptz") if shape.as_of else None
        lateral, cols = self.record_source(r, as_of)
        return (
            f"(SELECT {self.record(sel.children, cols, as_of)} FROM records {r} {lateral} "
            f"WHERE {where} AND {r}.lane = ANY({lanes}) ORDER BY {r}.id LIMIT 1)"
        )

    def records_root(self, sel: Sel) -> str:
        shape = self.shapes[sel.site or 0]
        lanes = self.arg(sel.site, "lanes", "text[]")
        where = (
            f"AND q.source_type = {self.arg(sel.site, 'source_type')}" if shape.source_type else ""
        )
        limit = self.arg(sel.site, "limit")
        keyed = ""
        if shape.after:
            keyed = (
                f"AND (q.created_at, q.id) > ({self.arg(sel.site, 'after_at', 'timestamptz')}, "
                f"{self.arg(sel.site, 'after_id')})"
            )
        # Each lane's first rows in (lane, created_at, id) index order, merged; and
        # each lane counted on its own, so that the count is an index scan too.
        page = f"""SELECT pg.* FROM unnest({lanes}) AS l(lane)
            CROSS JOIN LATERAL (SELECT q.* FROM records q
              WHERE q.lane = l.lane {where} {keyed} ORDER BY q.created_at, q.id LIMIT {limit}) pg
            ORDER BY pg.created_at, pg.id LIMIT {limit}"""
        count = f"""SELECT coalesce(sum(c.n), 0)::bigint FROM unnest({lanes}) AS l(lane)
            CROSS JOIN LATERAL (SELECT count(*) AS n FROM records q
              WHERE q.lane = l.lane {where}) c"""
        return self.page(sel, page, count, None, by_time=True, whole_rows=True)

    def gather_root(self, sel: Sel) -> str:
        shape = self.shapes[sel.site or 0]
        if shape.properties == 0:
            # No property left to match (only the adjustment label): an empty page.
            return self.page(sel, "SELECT NULL::text AS id WHERE false", "SELECT 0", None, False)
        site_p = _SiteParams(self, sel.site)
        members = members_sql(site_p, shape.properties, shape.mode, shape.as_of)
        as_of = self.arg(sel.site, "as_of", "timestamptz") if shape.as_of else None
        limit = self.arg(sel.site, "limit")
        timeline = shape.mode is GatherMode.TIMELINE
        if timeline:
            keyed = ""
            if shape.after:
                keyed = (
                    f"AND (m.joined, m.record_id) > "
                    f"({self.arg(sel.site, 'after_at', 'timestamptz')}, "
                    f"{self.arg(sel.site, 'after_id')})"
                )
            # By when each record joined one of the edges, as the resolvers order it.
            page = f"""SELECT m.record_id AS id, m.joined AS created_at FROM ({members}) m
                WHERE true {keyed} ORDER BY m.joined, m.record_id LIMIT {limit}"""
        else:
            keyed = f"WHERE m.record_id > {self.arg(sel.site, 'after_id')}" if shape.after else ""
            page = f"SELECT m.record_id AS id FROM ({members}) m {keyed} ORDER BY 1 LIMIT {limit}"
        count = f"SELECT count(*) FROM ({members}) m"
        return self.page(sel, page, count, as_of, by_time=timeline)

    def edge_property_root(self, sel: Sel) -> str:
        shape = self.shapes[sel.site or 0]
        as_of = self.arg(sel.site, "as_of", "timestamptz") if shape.as_of else None
        label, value = self.arg(sel.site, "label"), self.arg(sel.site, "value")
        count = self.member_count(label, value, as_of)
        body = self.edge_property(sel.children, "NULL::text", label, value, as_of)
        return (
            f"(SELECT CASE WHEN c.n = 0 THEN NULL ELSE {body} END FROM (SELECT ({count}) AS n) c)"
        )

    # -- records ----------------------------------------------------------------

    def record_source(self, r: str, as_of: str | None) -> tuple[str, dict[str, str]]:
        """What joins `records {r}` to give a record as of `as_of` (nothing, for now), and
        the expression of each of its fields."""
        cols = {
            "id": f"{r}.id",
            "createdAt": iso(f"{r}.created_at"),
            "createdBy": f"{r}.created_by",
        }
        if as_of is None:
            cols.update(
                lane=f"{r}.lane",
                sourceType=f"{r}.source_type",
                authority=f"{r}.authority",
                content=f"{r}.content",
                version=f"{r}.version",
                updatedAt=iso(f"{r}.updated_at"),
                _properties=f"{r}.properties",
            )
            return "", cols
        v = f"{r}v"
        cols.update(
            lane=f"{v}.state->>'lane'",
            sourceType=f"{v}.state->>'source_type'",
            authority=f"{v}.state->>'authority'",
            content=f"{v}.state->>'content'",
            version=f"{v}.version",
            updatedAt=iso(f"{v}.at"),
            _properties=f"{v}.state->'properties'",
        )
        # The newest version written by as_of (none: the record did not exist yet).
        lateral = (
            f"CROSS JOIN LATERAL (SELECT e.version, e.at, e.state FROM ledger e "
            f"WHERE e.kind = 'record' AND e.object_id = {r}.id AND e.at <= {as_of} "
            f"ORDER BY e.version DESC LIMIT 1) {v}"
        )
        return lateral, cols

    def record(self, children: Sequence[Sel], cols: Mapping[str, str], as_of: str | None) -> str:
        pairs = []
        for sel in children:
            if sel.name == "__typename":
                pairs.append((sel.key, "'Record'"))
            elif sel.name == "properties":
                pairs.append((sel.key, self.declared(cols["_properties"])))
            elif sel.name == "edgeProperties":
                pairs.append((sel.key, self.edge_properties(sel, cols, as_of)))
            elif sel.name == "versions":
                pairs.append((sel.key, self.versions(sel, cols)))
            elif sel.name in cols and not sel.name.startswith("_"):
                pairs.append((sel.key, cols[sel.name]))
            else:
                raise NotCompilable(f"Record.{sel.name}")
        return obj(pairs)

    @staticmethod
    def declared(pairs: str) -> str:
        """SQL: the caller-written properties (no e_* label) as label:value strings, in order."""
        return (
            f"(SELECT coalesce(json_agg((x.p->>0) || ':' || (x.p->>1) ORDER BY x.o), '[]'::json) "
            f"FROM jsonb_array_elements({pairs}) WITH ORDINALITY AS x(p, o) "
            f"WHERE left(x.p->>0, 2) <> 'e_')"
        )

    def edge_properties(self, sel: Sel, cols: Mapping[str, str], as_of: str | None) -> str:
        x = self.alias("x")
        label, value = f"({x}.p->>0)", f"({x}.p->>1)"
        ident = (
            f"'ep_' || left(encode(sha256(convert_to({cols['id']} || chr(31) || 'epg/1' || "
            f"chr(31) || {label} || chr(31) || {value}, 'UTF8')), 'hex'), 32)"
        )
        body = self.edge_property(sel.children, ident, label, value, as_of)
        # Every edge property but the adjustment chain's, in the order the record holds them.
        return (
            f"(SELECT coalesce(json_agg({body} ORDER BY {x}.o), '[]'::json) "
            f"FROM jsonb_array_elements({cols['_properties']}) WITH ORDINALITY AS {x}(p, o) "
            f"WHERE {x}.p->>0 <> 'e_adjustment')"
        )

    def edge_property(
        self, children: Sequence[Sel], ident: str, label: str, value: str, as_of: str | None
    ) -> str:
        pairs = []
        for sel in children:
            if sel.name == "__typename":
                pairs.append((sel.key, "'EdgeProperty'"))
            elif sel.name == "id":
                pairs.append((sel.key, ident))
            elif sel.name == "property":
                pairs.append((sel.key, f"{label} || ':' || {value}"))
            elif sel.name == "label":
                pairs.append((sel.key, label))
            elif sel.name == "value":
                pairs.append((sel.key, value))
            elif sel.name == "memberCount":
                pairs.append((sel.key, f"({self.member_count(label, value, as_of)})"))
            elif sel.name == "members":
                pairs.append((sel.key, self.members(sel, label, value, as_of)))
            else:
                raise NotCompilable(f"EdgeProperty.{sel.name}")
        return obj(pairs)

    def member_count(self, label: str, value: str, as_of: str | None) -> str:
        m = self.alias("m")
        return (
            f"SELECT count(DISTINCT {m}.record_id) FROM edge_properties {m} "
            f"WHERE {carries(m, label, value)} "
            f"AND {m}.lane = ANY({self.lanes()}) AND {member_at(m, as_of)} "
            # Adjustment chains are never hyperedges: no members to count.
            f"AND {m}.label <> 'e_adjustment'"
        )

    def members(self, sel: Sel, label: str, value: str, as_of: str | None) -> str:
        shape = self.shapes[sel.site or 0]
        m = self.alias("m")
        keyed = f"AND {m}.record_id > {self.arg(sel.site, 'after_id')}" if shape.after else ""
        where = (
            f"{carries(m, label, value)} AND {m}.lane = ANY({self.lanes()}) "
            f"AND {member_at(m, as_of)}"
        )
        page = (
            f"SELECT DISTINCT {m}.record_id AS id FROM edge_properties {m} WHERE {where} {keyed} "
            f"ORDER BY 1 LIMIT {self.arg(sel.site, 'limit')}"
        )
        count = f"SELECT count(DISTINCT {m}.record_id) FROM edge_properties {m} WHERE {where}"
        return self.page(sel, page, count, as_of, by_time=False)

    def versions(self, sel: Sel, cols: Mapping[str, str]) -> str:
        v = self.alias("v")
        fields = {
            "number": f"{v}.version",
            "at": iso(f"{v}.at"),
            "event": f"{v}.event",
            "actor": f"{v}.actor",
            "content": f"{v}.state->>'content'",
            "properties": self.declared(f"{v}.state->'properties'"),
            "lane": f"{v}.state->>'lane'",
            "sourceType": f"{v}.state->>'source_type'",
            "authority": f"{v}.state->>'authority'",
            "policyVersion": f"{v}.policy_version",
            "hash": f"{v}.hash",
            "__typename": "'Version'",
        }
        pairs = []
        for child in sel.children:
            if child.name not in fields:
                raise NotCompilable(f"Version.{child.name}")
            pairs.append((child.key, fields[child.name]))
        # Every version up to the one shown, oldest first.
        return (
            f"(SELECT coalesce(json_agg({obj(pairs)} ORDER BY {v}.version), '[]'::json) "
            f"FROM ledger {v} WHERE {v}.kind = 'record' AND {v}.object_id = {cols['id']} "
            f"AND {v}.version <= {cols['version']})"
        )

    # -- pages ------------------------------------------------------------------

    def page(
        self,
        sel: Sel,
        page: str,
        count: str,
        as_of: str | None,
        by_time: bool,
        whole_rows: bool = False,
    ) -> str:
        """SQL: a RecordPage object over `page` (rows id[, created_at], at most limit+1;
        with `whole_rows`, current `records` rows, which need no second read)."""
        s, r = self.alias("s"), self.alias("r")
        # A placeholder is numbered at its first use: only a used one may exist.
        size = f"{{size_{s}}}"
        lateral, cols = self.record_source(r, as_of)
        key = [iso(f"{s}.created_at"), f"{s}.id"] if by_time else [f"{s}.id"]
        pairs = []
        for child in sel.children:
            if child.name == "__typename":
                pairs.append((child.key, "'RecordPage'"))
            elif child.name == "totalCount":
                pairs.append((child.key, f"({count})"))
            elif child.name == "items":
                body = self.record(child.children, cols, as_of)
                if whole_rows:
                    pairs.append(
                        (
                            child.key,
                            f"""coalesce((SELECT json_agg({body} ORDER BY {r}.n)
                            FROM {s} {r} WHERE {r}.n <= {size}), '[]'::json)""",
                        )
                    )
                    continue
                # Records the caller may read, in the page's order; the extra row only
                # tells whether there is a next page.
                pairs.append(
                    (
                        child.key,
                        f"""coalesce((SELECT json_agg({body} ORDER BY {s}i.n)
                        FROM (SELECT * FROM {s} WHERE {s}.n <= {size}) {s}i
                        JOIN records {r} ON {r}.id = {s}i.id AND {r}.lane = ANY({self.lanes()})
                        {lateral}), '[]'::json)""",
                    )
                )
            elif child.name == "pageInfo":
                pairs.append((child.key, self.page_info(child, s, size, key)))
            else:
                raise NotCompilable(f"RecordPage.{child.name}")
        ordered = "ORDER BY created_at, id" if by_time else "ORDER BY id"
        body = obj(pairs)
        if size in body:
            body = body.replace(size, self.arg(sel.site, "size"))
        return (
            f"(WITH {s} AS (SELECT row_number() OVER ({ordered}) AS n, * FROM ({page}) w) "
            f"SELECT {body})"
        )

    def page_info(self, sel: Sel, s: str, size: str, key: Sequence[str]) -> str:
        pairs = []
        for child in sel.children:
            if child.name == "__typename":
                pairs.append((child.key, "'PageInfo'"))
            elif child.name == "hasNextPage":
                pairs.append((child.key, f"(SELECT count(*) > {size} FROM {s})"))
            elif child.name == "endCursor":
                pairs.append(
                    (
                        child.key,
                        f"(SELECT {cursor(key)} FROM {s} WHERE {s}.n <= {size} "
                        f"ORDER BY {s}.n DESC LIMIT 1)",
                    )
                )
            else:
                raise NotCompilable(f"PageInfo.{child.name}")
        return obj(pairs)


class _SiteParams(Params):
    """Params whose names are one site's (label_0, lanes, as_of...) on a shared numbering."""

    def __init__(self, compiler: Compiler, site: int | None) -> None:
        super().__init__()
        self.compiler = compiler
        self.site = site

    def __call__(self, name: str, cast: str | None = None) -> str:
        return self.compiler.arg(self.site, name, cast)
