"""The `conflicts` read: the review queue, contradicts edges of the chosen lanes, the
unresolved first, each part oldest first (the queue is `store.kinds.edge.queries`' own)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from store.kinds.edge.compiled import edge_page_sql
from store.kinds.edge.model import Edge
from store.kinds.edge.queries import ConflictsShape, bind_conflicts, conflicts, conflicts_sql
from store.reads.compiled_sql import Compiler, Sel, SiteParams
from store.reads.pages import Page, bind_page
from store.reads.registry import Before, Values, Wants
from store.reads.snapshot import Reader
from store.reads.visibility import RULE


@dataclass(frozen=True)
class ConflictsArgs:
    # A key of `CONFLICT_STATUSES`.
    status: str
    lanes: Sequence[str] | None
    first: int | None
    after: str | None


@dataclass(frozen=True)
class ConflictsRead:
    field: str = "conflicts"
    before: Before | None = None

    def arguments(self, given: Mapping[str, Any]) -> ConflictsArgs:
        status = given.get("status")
        return ConflictsArgs(
            "UNRESOLVED" if status is None else status.name,
            given.get("lanes"),
            given.get("first"),
            given.get("after"),
        )

    def bind(
        self, values: Values, prefix: str, args: ConflictsArgs, lanes: Sequence[str]
    ) -> ConflictsShape:
        bind_page(values, prefix, args.first)
        chosen = RULE.chosen(lanes, args.lanes)
        return bind_conflicts(values, prefix, lanes, args.status, chosen, args.after)

    def sql(self, compiler: Compiler, sel: Sel, shape: ConflictsShape) -> str:
        """SQL: an EdgePage of the review queue, the unresolved first, each part oldest
        first."""
        read = conflicts_sql(SiteParams(compiler, sel.site), shape)
        return edge_page_sql(compiler, sel, read, "rank, created_at, id", None)

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> Page[Edge]:
        args = self.arguments(given)
        chosen = RULE.chosen(lanes, args.lanes)
        return await conflicts(db, lanes, args.status, chosen, args.first, args.after)


READ = ConflictsRead()
