"""The GraphQL types of a traversal (its items, its clipped hubs), built from the store's
walk, with the SQL of each field for the compiled path beside it."""

from __future__ import annotations

from datetime import datetime

import strawberry

from gql.api.compiled.fields import compiled
from gql.api.edge_types import Edge
from gql.api.types import Info, Record
from policies.properties import Property
from store.kinds.edge.model import Edge as EdgeRow
from store.kinds.edge.queries import edges_by_id
from store.kinds.record import traverse
from store.kinds.record.reads import traverse as sql
from store.reads.compiled_sql import column


@strawberry.type(description="One record a traversal reached.")
class TraversalItem:
    record: Record = strawberry.field(
        description="The record reached.", metadata=compiled(sql.step_record)
    )
    hop: int = strawberry.field(
        description="How many edges away from the start it is.",
        metadata=compiled(sql.step_column("hop")),
    )
    via: str = strawberry.field(
        description="What it was reached by: the edge property (label:value), or the type "
        "of the typed edge (then `edge` is that edge).",
        metadata=compiled(sql.step_column("via")),
    )
    edge: Edge | None = strawberry.field(
        description="The typed edge it was reached by (its type, detector, evidence), "
        "either way from a record of the hop before; null when it was reached by an edge "
        "property.",
        metadata=compiled(sql.step_edge),
    )


@strawberry.type(description="A value shared by too many records to walk (a hub).")
class ClippedEdge:
    via: str = strawberry.field(
        description="The edge property (label:value) that was not walked.",
        metadata=compiled(column("via")),
    )
    hop: int = strawberry.field(
        description="At which hop it was met.", metadata=compiled(column("hop"))
    )
    member_count: int = strawberry.field(
        description="How many readable records carry it (at least that many when "
        "memberCountExact is false).",
        metadata=compiled(column("member_count")),
    )
    member_count_exact: bool = strawberry.field(
        description="False when memberCount is a lower bound: counted as of an earlier "
        "instant, the count stopped at the walk's counting budget.",
        metadata=compiled(column("exact")),
    )


@strawberry.type(description="The records reached from one record, breadth first.")
class Traversal:
    items: list[TraversalItem] = strawberry.field(
        description="The records reached, nearest first, the start left out.",
        metadata=compiled(sql.walk_items),
    )
    not_shown: int = strawberry.field(
        description="Records reached but not listed: those past limit, plus the members of "
        "each clipped hub (see clipped); at least that many when notShownExact is false.",
        metadata=compiled(sql.walk_value("not_shown", "bigint")),
    )
    not_shown_exact: bool = strawberry.field(
        description="False when notShown is a lower bound: the walk stopped at its limit "
        "with values it reached left uncounted (its counting budget; beyondLimit is then a "
        "lower bound too), or a clipped hub's memberCount is one.",
        metadata=compiled(sql.walk_value("not_shown_exact", "boolean")),
    )
    clipped: list[ClippedEdge] = strawberry.field(
        description="Hubs met but not walked: values shared by too many records.",
        metadata=compiled(sql.walk_clipped),
    )
    beyond_limit: int = strawberry.field(
        description="Records reached past limit, not listed; at least that many when "
        "notShownExact is false.",
        metadata=compiled(sql.walk_value("beyond_limit", "bigint")),
    )


async def traversal(info: Info, found: traverse.Traversal, as_of: datetime | None) -> Traversal:
    records = await info.context.records([s.record_id for s in found.steps], as_of)
    linked = [s.via.edge_id for s in found.steps if isinstance(s.via, traverse.Linked)]
    edges: dict[str, EdgeRow] = {}
    if linked:
        async with info.context.read() as (db, lanes):
            edges = await edges_by_id(db, linked, lanes, as_of)

    def edge(via: Property | traverse.Linked) -> Edge | None:
        if not isinstance(via, traverse.Linked) or via.edge_id not in edges:
            return None
        return Edge.from_domain(edges[via.edge_id], as_of)

    return Traversal(
        items=[
            TraversalItem(
                record=Record.from_domain(records[s.record_id], as_of),
                hop=s.hop,
                via=str(s.via),
                edge=edge(s.via),
            )
            for s in found.steps
            if s.record_id in records
        ],
        not_shown=found.not_shown,
        not_shown_exact=found.not_shown_exact,
        clipped=[
            ClippedEdge(
                via=str(c.via),
                hop=c.hop,
                member_count=c.member_count,
                member_count_exact=c.exact,
            )
            for c in found.clipped
        ],
        beyond_limit=found.beyond_limit,
    )
