"""The `traverse` read: a walk breadth first from one record over the edges it shares.

The walk itself is `store.kinds.record.traverse.walk_from`, which the resolver's `find`
runs; on the compiled path it runs first, hop by hop on the request's snapshot
(`read_walk`, the read's `before`), and what it found reaches the statement as arrays
(`walk_values`); the statement reads, in the same snapshot, only the fields asked of the
records and typed edges it reached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from store.kinds.edge.queries import edge_source
from store.kinds.record.compiled import record_source
from store.kinds.record.resolve import check_record_ident, readable_sql
from store.kinds.record.traverse import Linked, Traversal, Walk, check, walk_from
from store.reads.compiled_sql import Compiler, EdgeRow, RecordRow, Sel, SiteParams
from store.reads.json_sql import Build
from store.reads.registry import Before, Values, Wants
from store.reads.snapshot import Reader
from store.reads.visibility import RULE

# The value (of the traverse field's site) holding what is asked: a `Walk`.
ASKED = "walk"


async def read_walk(db: Reader, prefix: str, values: dict[str, Any]) -> None:
    """Walk as the resolver does (the start resolved the same way, refused the same way)
    and put what was found in `values` under the site's `prefix`."""
    walk_values(await walk_from(db, values[prefix + ASKED]), prefix, values)


def walk_values(found: Traversal, prefix: str, values: dict[str, Any]) -> None:
    """The parameters of `traverse_root` for what a walk found."""
    steps = found.steps
    values[prefix + "ids"] = [s.record_id for s in steps]
    values[prefix + "hops"] = [s.hop for s in steps]
    values[prefix + "vias"] = [str(s.via) for s in steps]
    values[prefix + "edge_ids"] = [
        s.via.edge_id if isinstance(s.via, Linked) else None for s in steps
    ]
    clipped = found.clipped
    values[prefix + "clipped_vias"] = [str(c.via) for c in clipped]
    values[prefix + "clipped_hops"] = [c.hop for c in clipped]
    values[prefix + "clipped_counts"] = [c.member_count for c in clipped]
    values[prefix + "clipped_exact"] = [c.exact for c in clipped]
    values[prefix + "not_shown"] = found.not_shown
    values[prefix + "not_shown_exact"] = found.not_shown_exact
    values[prefix + "beyond_limit"] = found.beyond_limit


@dataclass(frozen=True)
class WalkRow:
    """A traversal being read: its site (the parameters of what its walk found), and
    the instant read at."""

    site: int | None
    as_of: str | None


@dataclass(frozen=True)
class StepRow:
    """One step of a walk: the alias of its row (id, hop, via, edge_id, n), its record's
    columns, and the traversal it belongs to."""

    alias: str
    record: RecordRow
    walk: WalkRow


@dataclass(frozen=True)
class TraverseShape:
    # At an earlier instant: the records and typed edges reached are read as they were.
    as_of: bool


@dataclass(frozen=True)
class TraverseRead:
    field: str = "traverse"
    before: Before | None = read_walk

    def arguments(self, given: Mapping[str, Any]) -> Walk:
        """The walk asked for (defaults filled in), checked; its lanes are the caller's,
        given when it runs."""
        depth, limit = given.get("depth"), given.get("limit")
        asked = Walk(
            given["from"],
            (),
            1 if depth is None else depth,
            given.get("labels"),
            given.get("asOf"),
            100 if limit is None else limit,
            given.get("edgeTypes"),
        )
        check(asked.depth, asked.limit, asked.labels, asked.edge_types)
        return asked

    def bind(self, values: Values, prefix: str, args: Walk, lanes: Sequence[str]) -> TraverseShape:
        """The walk to run before the statement (`read_walk`)."""
        start = check_record_ident(args.start)
        values[prefix + ASKED] = replace(args, start=start, lanes=list(lanes))
        values[prefix + "as_of"] = args.as_of
        return TraverseShape(args.as_of is not None)

    def sql(self, compiler: Compiler, sel: Sel, shape: TraverseShape) -> str:
        """SQL: a Traversal of the walk the site's read found."""
        # A placeholder is numbered at its first use: only a used one may exist (a
        # selection of the figures alone reads no record, so no instant).
        as_of = f"{{as_of_{compiler.alias('w')}}}" if shape.as_of else None
        body = compiler.fields(sel.children, WalkRow(sel.site, as_of))
        if as_of is not None and as_of in body:
            body = body.replace(as_of, compiler.arg(sel.site, "as_of", "timestamptz"))
        return body

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> Traversal:
        args = self.arguments(given)
        return await walk_from(db, replace(args, lanes=list(lanes)))


def walk_items(compiler: Compiler, sel: Sel, row: WalkRow) -> str:
    """SQL: the records reached that the caller may read then, in the walk's order."""
    t, r = compiler.alias("t"), compiler.alias("r")
    lateral, cols = record_source(compiler, r, row.as_of)
    body = compiler.fields(sel.children, StepRow(t, RecordRow(cols, row.as_of), row))
    steps = ", ".join(
        compiler.arg(row.site, name, cast)
        for name, cast in (
            ("ids", "text[]"),
            ("hops", "int[]"),
            ("vias", "text[]"),
            ("edge_ids", "text[]"),
        )
    )
    # Each record by primary key whatever the statistics say (a join, planned for tables
    # not analyzed since a bulk load, skip-scanned a lane-led index instead).
    return f"""coalesce((SELECT json_agg({body} ORDER BY {t}.n)
        FROM unnest({steps}) WITH ORDINALITY AS {t}(id, hop, via, edge_id, n)
        CROSS JOIN LATERAL (SELECT * FROM records WHERE id = {t}.id OFFSET 0) {r}
        {lateral} WHERE {readable_sql(r, compiler.lanes(), row.as_of)}), '[]'::json)"""


def step_record(compiler: Compiler, sel: Sel, row: StepRow) -> str:
    return compiler.fields(sel.children, row.record)


def step_column(name: str) -> Build:
    """A column of the step's row (hop, via)."""
    return lambda compiler, sel, row: f"{row.alias}.{name}"


def step_edge(compiler: Compiler, sel: Sel, row: StepRow) -> str:
    """SQL: the typed edge the step went over, as the caller sees it then; null for a
    step over an edge property."""
    p = SiteParams(compiler, row.walk.site)
    body = compiler.fields(sel.children, EdgeRow("g", row.walk.as_of))
    visible = RULE.edge("g", compiler.lanes(), row.walk.as_of)
    return (
        f"(SELECT {body} FROM {edge_source(p, row.walk.as_of is not None)} "
        f"WHERE g.id = {row.alias}.edge_id AND {visible})"
    )


def walk_value(name: str, cast: str) -> Build:
    """A figure of the walk (notShown, ...), as the walk found it."""
    return lambda compiler, sel, row: compiler.arg(row.site, name, cast)


def walk_clipped(compiler: Compiler, sel: Sel, row: WalkRow) -> str:
    """SQL: the hubs met and not walked, in the walk's order."""
    c = compiler.alias("c")
    body = compiler.fields(sel.children, c)
    lists = ", ".join(
        compiler.arg(row.site, name, cast)
        for name, cast in (
            ("clipped_vias", "text[]"),
            ("clipped_hops", "int[]"),
            ("clipped_counts", "bigint[]"),
            ("clipped_exact", "boolean[]"),
        )
    )
    return (
        f"(SELECT coalesce(json_agg({body} ORDER BY {c}.n), '[]'::json) "
        f"FROM unnest({lists}) WITH ORDINALITY AS {c}(via, hop, member_count, exact, n))"
    )


READ = TraverseRead()
