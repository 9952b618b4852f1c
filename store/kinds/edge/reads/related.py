"""The `related` read: the typed edges into and out of one record (of a note, its parts'
too), with the records at their ends; each end's page is the list `edges` gives, with
`related`'s filters and the page's own first and after."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from store.ids import RECORD_ID
from store.kinds.edge.compiled import edge_page_sql, record_at
from store.kinds.edge.queries import FILTERS, EdgesShape, list_sql
from store.kinds.record.resolve import check_record_ident, resolve_id
from store.reads.compiled_sql import Compiler, Sel, SiteParams
from store.reads.json_sql import Build
from store.reads.pages import bind_page, time_cursor
from store.reads.registry import Before, Ordinary, Values, Wants
from store.reads.snapshot import Reader
from store.reads.visibility import RULE


@dataclass(frozen=True)
class RelatedArgs:
    ident: str
    namespace: str | None
    as_of: datetime | None
    include_expired: bool


@dataclass(frozen=True)
class RelatedShape:
    # Only edges of the namespace given.
    namespace: bool
    expired: bool


@dataclass(frozen=True)
class RelatedRead:
    field: str = "related"
    before: Before | None = None

    def arguments(self, given: Mapping[str, Any]) -> RelatedArgs:
        return RelatedArgs(
            given["id"],
            given.get("namespace"),
            given.get("asOf"),
            bool(given.get("includeExpired")),
        )

    def bind(
        self, values: Values, prefix: str, args: RelatedArgs, lanes: Sequence[str]
    ) -> RelatedShape:
        ident = check_record_ident(args.ident)
        # A prefix is resolved, and a record retired then refused, the ordinary way.
        if RECORD_ID.fullmatch(ident) is None or args.as_of is not None:
            raise Ordinary("id is resolved by the ordinary path")
        values[prefix + "id"] = ident
        values[prefix + "namespace"] = args.namespace
        return RelatedShape(args.namespace is not None, args.include_expired)

    def sql(self, compiler: Compiler, sel: Sel, shape: RelatedShape) -> str:
        """SQL: a Related object, the record's edges out and in (its id already whole)."""
        ident = compiler.arg(sel.site, "id", "text")
        lanes = compiler.lanes()
        q = compiler.alias("q")
        # A record not readable now (missing, or retired) is a refusal the ordinary path
        # words.
        compiler.checks.append(
            f"EXISTS (SELECT 1 FROM records {q} WHERE {q}.id = {ident} AND {RULE.record(q, lanes)})"
        )
        return compiler.fields(sel.children, RelatedRow(sel.site, ident, shape))

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> str:
        """The full id of the record (refused as `resolve_id` refuses it)."""
        args = self.arguments(given)
        return await resolve_id(db, args.ident, lanes, args.as_of)


@dataclass(frozen=True)
class RelatedRow:
    site: int | None
    ident: str
    shape: RelatedShape


def related_id(compiler: Compiler, sel: Sel, row: RelatedRow) -> str:
    return row.ident


def related_record(compiler: Compiler, sel: Sel, row: RelatedRow) -> str:
    return record_at(compiler, sel, row.ident, None)


@dataclass(frozen=True)
class EndPageShape:
    """What changes the statement of a page of the edges at one end of `related`'s record
    (its filters being related's, `RelatedShape`): whether it goes on after a cursor."""

    after: bool


def bind_end_page(
    prefix: str, args: Mapping[str, Any], lanes: Sequence[str], values: Values
) -> EndPageShape:
    """A page of the edges at one end of `related`'s record (its filters are related's):
    its size, and its cursor when it has one."""
    bind_page(values, prefix, args.get("first"))
    keyed = time_cursor(args.get("after"))
    if keyed is not None:
        values[prefix + "after_at"], values[prefix + "after_id"] = keyed
    return EndPageShape(after=keyed is not None)


def _end(end: str) -> Build:
    def build(compiler: Compiler, sel: Sel, row: RelatedRow) -> str:
        """SQL: an EdgePage of the edges at one end of the record (of a note, its parts'
        too), as `related`'s ordinary path pages them (`list_sql`: `related`'s filters,
        the page's own first and after)."""
        page = compiler.shapes[sel.site or 0]
        assert isinstance(page, EndPageShape)
        given = {end: row.ident, "lanes": compiler.lanes()}
        if row.shape.namespace:
            given["namespace"] = compiler.arg(row.site, "namespace")
        shape = EdgesShape(
            after=page.after,
            filters=tuple(f for f in FILTERS if f in given),
            expired=row.shape.expired,
        )
        read = list_sql(SiteParams(compiler, sel.site, given), shape)
        return edge_page_sql(compiler, sel, read, "created_at, id", None)

    return build


related_outgoing = _end("note_from")
related_incoming = _end("note_to")

READ = RelatedRead()
