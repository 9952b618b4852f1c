"""The `search` read: records by their words, by a vector, or both fused, narrowed like a
gather (see `store.kinds.record.search` for how it reads and ranks).

Its arguments are read once here (`arguments`) and made the store's `SearchArgs` in one
place (`search_args`), with the lanes the caller may read and what a vector may be
compared with (`VectorScope`: the resolver reads it from the policy; the compiled path is
handed it among the request's values, under `VECTOR_SCOPE`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from store.kinds.record.compiled import record_source
from store.kinds.record.search import find, planner, statement
from store.kinds.record.search.arguments import SearchArgs, SearchShape, VectorScope, bind
from store.kinds.record.search.compiled_json import SearchPageRow
from store.kinds.record.search.terms import Syntax
from store.reads.compiled_sql import Compiler, RecordRow, Sel, SiteParams
from store.reads.gather_mode import GatherMode
from store.reads.json_sql import iso
from store.reads.pages import bind_page
from store.reads.registry import Before, Ordinary, Values, Wants
from store.reads.snapshot import Reader
from store.reads.statements import PageSql
from store.reads.visibility import RULE

# Among a request's values, not a parameter: what the binder checks a vector by.
VECTOR_SCOPE = "@vector_scope"
# Beside the field's GraphQL values on the resolver path (not a GraphQL argument): what a
# vector may be compared with, read from the policy.
SCOPE = "scope"


@dataclass(frozen=True)
class SearchAsked:
    """A search's arguments as GraphQL gives them (`lanes`: those asked for)."""

    text: str | None
    vector: Sequence[float] | None
    match: Sequence[str] | None
    mode: GatherMode
    lanes: Sequence[str] | None
    source_types: Sequence[str] | None
    as_of: datetime | None
    first: int | None
    after: str | None
    syntax: Syntax
    # What a vector may be compared with (the resolver's, from the policy).
    scope: VectorScope | None = None


def search_args(asked: SearchAsked, lanes: Sequence[str], scope: VectorScope | None) -> SearchArgs:
    """The store's arguments of a search by a caller who may read `lanes`."""
    return SearchArgs(
        asked.text,
        asked.match,
        asked.mode,
        RULE.chosen(lanes, asked.lanes),
        asked.source_types,
        asked.as_of,
        asked.after,
        asked.vector,
        scope or VectorScope(),
        asked.syntax,
    )


async def read_plan(db: Reader, prefix: str, values: Values) -> None:
    """Plan the search as the resolver does, on the request's snapshot, and put the
    plan's values in `values` under the site's `prefix`."""
    await planner.plan_search(db, values, prefix)


@dataclass(frozen=True)
class SearchRead:
    field: str = "search"
    before: Before | None = read_plan

    def arguments(self, given: Mapping[str, Any]) -> SearchAsked:
        syntax = Syntax((given.get("syntax") or Syntax.NATURAL).value)
        return SearchAsked(
            given.get("text"),
            given.get("vector"),
            given.get("match"),
            GatherMode((given.get("mode") or GatherMode.INTERSECT).value),
            given.get("lanes"),
            given.get("sourceTypes"),
            given.get("asOf"),
            given.get("first"),
            given.get("after"),
            syntax,
            given.get(SCOPE),
        )

    def bind(
        self, values: Values, prefix: str, args: SearchAsked, lanes: Sequence[str]
    ) -> SearchShape:
        bind_page(values, prefix, args.first)
        scope = values.get(VECTOR_SCOPE)
        if args.vector is not None and not isinstance(scope, VectorScope):
            raise Ordinary("a search by vector reads its scope from the policy")
        shape = bind(values, prefix, search_args(args, lanes, scope))
        if shape is None:
            raise Ordinary("nothing to find (match names only the engine's labels)")
        # The highlights are built where the field asks for them (search_compiled).
        return replace(shape, highlights=False)

    def sql(self, compiler: Compiler, sel: Sel, shape: SearchShape) -> str:
        """SQL: a SearchPage, best first, with the exact count."""
        p = SiteParams(compiler, sel.site)
        hits = statement.hits_sql(p, shape)
        page, count = statement.search_sql(p, shape)
        as_of = compiler.arg(sel.site, "as_of", "timestamptz") if shape.as_of else None
        s, r = compiler.alias("s"), compiler.alias("r")
        lateral, cols = record_source(compiler, r, as_of)
        key = [f"{s}.score_key", iso(f"{s}.since"), f"{s}.id"]
        # A placeholder is numbered at its first use: only a used one may exist.
        row = SearchPageRow(
            s,
            r,
            f"{{size_{s}}}",
            count,
            lateral,
            RecordRow(cols, as_of),
            key,
            False,
            as_of,
            site=sel.site,
        )
        return compiler.paged(sel, PageSql(page, count, hits), "place", row)

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> find.Hits:
        args = self.arguments(given)
        count = wants("totalCount")
        marks = wants("items", "highlights")
        asked = search_args(args, lanes, args.scope)
        return await find.search(db, asked, args.first, count, marks)


READ = SearchRead()
