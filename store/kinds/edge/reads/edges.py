"""The `edges` read: typed edges by filters, every given one AND-ed, oldest first, with
their count (the listing is `store.kinds.edge.queries`' own: its source, filters and
cursor, the same for both paths)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from store.errors import NotFoundError
from store.ids import RECORD_ID
from store.kinds.edge.compiled import edge_page_sql
from store.kinds.edge.model import Edge
from store.kinds.edge.queries import EdgesShape, bind_list, list_edges, list_sql
from store.kinds.record.resolve import check_record_ident, resolve_id
from store.reads.compiled_sql import Compiler, Sel, SiteParams
from store.reads.pages import Page, bind_page
from store.reads.registry import Before, Ordinary, Values, Wants
from store.reads.snapshot import Reader
from store.reads.visibility import RULE


@dataclass(frozen=True)
class EdgesArgs:
    from_id: str | None
    to_id: str | None
    type: str | None
    namespace: str | None
    as_of: datetime | None
    include_expired: bool
    first: int | None
    after: str | None


@dataclass(frozen=True)
class EdgesRead:
    field: str = "edges"
    before: Before | None = None

    def arguments(self, given: Mapping[str, Any]) -> EdgesArgs:
        return EdgesArgs(
            given.get("fromId"),
            given.get("toId"),
            given.get("type"),
            given.get("namespace"),
            given.get("asOf"),
            bool(given.get("includeExpired")),
            given.get("first"),
            given.get("after"),
        )

    def bind(
        self, values: Values, prefix: str, args: EdgesArgs, lanes: Sequence[str]
    ) -> EdgesShape:
        bind_page(values, prefix, args.first)
        given: dict[str, str | None] = {"type": args.type, "namespace": args.namespace}
        for name, found in (("from_id", args.from_id), ("to_id", args.to_id)):
            if found is not None:
                found = check_record_ident(found)
                # A prefix is resolved, and a record then retired refused, the ordinary way.
                if RECORD_ID.fullmatch(found) is None or args.as_of is not None:
                    raise Ordinary(f"{name} is resolved by the ordinary path")
            given[name] = found
        return bind_list(values, prefix, lanes, given, args.as_of, args.include_expired, args.after)

    def sql(self, compiler: Compiler, sel: Sel, shape: EdgesShape) -> str:
        """SQL: an EdgePage of the edges, oldest first, with the total count."""
        p = SiteParams(compiler, sel.site)
        for name in ("from_id", "to_id"):
            if name in shape.filters:
                # A record retired now, named by its id, is a refusal the ordinary path
                # words.
                q = compiler.alias("q")
                compiler.checks.append(
                    f"NOT EXISTS (SELECT 1 FROM records {q} WHERE {q}.id = {p(name)} "
                    f"AND {RULE.retired_now(q, compiler.lanes())})"
                )
        as_of = p("as_of", "timestamptz") if shape.as_of else None
        return edge_page_sql(compiler, sel, list_sql(p, shape), "created_at, id", as_of)

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> Page[Edge] | None:
        """The page of edges; None when an end named names no record the caller can read."""
        args = self.arguments(given)
        try:
            start = (
                None
                if args.from_id is None
                else await resolve_id(db, args.from_id, lanes, args.as_of)
            )
            end = (
                None if args.to_id is None else await resolve_id(db, args.to_id, lanes, args.as_of)
            )
        except NotFoundError:
            return None
        return await list_edges(
            db,
            lanes,
            from_id=start,
            to_id=end,
            type=args.type,
            namespace=args.namespace,
            as_of=args.as_of,
            include_expired=args.include_expired,
            first=args.first,
            after=args.after,
        )


READ = EdgesRead()
