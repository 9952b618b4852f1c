"""The `edgeProperty` read: the hyperedge label:value, when a record the caller can read
carries it (its members are a page of their own, `gather.member_page`).

What it finds is the number of readable records carrying it, the count an
`EdgeProperty`'s `memberCount` gives: the resolver hands it to the request's batched
counts (`Context.counted`), so `memberCount` is read once, in this read's one query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from policies.properties import Property, parse_property
from store.kinds.record.compiled import member_count
from store.kinds.record.queries import member_counts
from store.reads.compiled_sql import Compiler, EdgePropertyRow, Sel
from store.reads.registry import Before, Values, Wants
from store.reads.snapshot import Reader


@dataclass(frozen=True)
class EdgePropertyArgs:
    property: Property
    as_of: datetime | None


@dataclass(frozen=True)
class Carried:
    """The property asked about, and how many readable records carry it."""

    property: Property
    members: int


@dataclass(frozen=True)
class EdgePropertyShape:
    as_of: bool


@dataclass(frozen=True)
class EdgePropertyRead:
    field: str = "edgeProperty"
    before: Before | None = None

    def arguments(self, given: Mapping[str, Any]) -> EdgePropertyArgs:
        """Its property parsed as on ingest (refused as ingest refuses it)."""
        return EdgePropertyArgs(parse_property(given["property"]), given.get("asOf"))

    def bind(
        self, values: Values, prefix: str, args: EdgePropertyArgs, lanes: Sequence[str]
    ) -> EdgePropertyShape:
        values[prefix + "label"], values[prefix + "value"] = (
            args.property.label,
            args.property.value,
        )
        values[prefix + "as_of"] = args.as_of
        return EdgePropertyShape(args.as_of is not None)

    def sql(self, compiler: Compiler, sel: Sel, shape: EdgePropertyShape) -> str:
        """SQL: the EdgeProperty, or null when no readable record carries it."""
        as_of = compiler.arg(sel.site, "as_of", "timestamptz") if shape.as_of else None
        label, value = compiler.arg(sel.site, "label"), compiler.arg(sel.site, "value")
        count = member_count(compiler, label, value, as_of)
        body = compiler.fields(sel.children, EdgePropertyRow("NULL::text", label, value, as_of))
        return (
            f"(SELECT CASE WHEN c.n = 0 THEN NULL ELSE {body} END FROM (SELECT ({count}) AS n) c)"
        )

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> Carried:
        """How many readable records carry the property (now, or at `as_of`)."""
        args = self.arguments(given)
        counts = await member_counts(db, [args.property], lanes, args.as_of)
        return Carried(args.property, counts.get(args.property, 0))


READ = EdgePropertyRead()
