"""Typed-edge reads and writes: the query fields and mutations of `Query` and `Mutation`
that concern `Edge`s (mixed into them)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry

from gql.api.compiled.fields import served
from gql.api.edge_types import (
    ConflictResolution,
    ConflictStatus,
    Direction,
    Edge,
    EdgeInput,
    EdgePage,
    EgoView,
    Related,
    edge_page,
)
from gql.api.page_types import PageInfo
from gql.api.reads import find
from gql.api.types import Info
from store.errors import NotFoundError
from store.kinds.edge import queries
from store.kinds.edge.commands import ResolveConflict, RetireEdge
from store.kinds.record.resolve import resolve_id

_AS_OF = "Read as things stood at this instant (default: now): the edges recorded by then."
_EMPTY = PageInfo(has_next_page=False, end_cursor=None)
_EXPIRED = "Also show edges no longer valid at asOf (retired ones), in their old window."


@strawberry.type
class EdgeQuery:
    @strawberry.field(
        description="Typed edges, every given filter AND-ed, oldest first, with the total "
        "count; for the edges around one record, related is shorter.",
        metadata=served("edges"),
    )
    async def edges(
        self,
        info: Info,
        from_id: Annotated[
            strawberry.ID | None,
            strawberry.argument(description="Only edges from this record (id or unique prefix)."),
        ] = None,
        to_id: Annotated[
            strawberry.ID | None,
            strawberry.argument(description="Only edges to this record (id or unique prefix)."),
        ] = None,
        type: Annotated[
            str | None,
            strawberry.argument(description="Only edges of this type, e.g. contradicts."),
        ] = None,
        namespace: Annotated[
            str | None, strawberry.argument(description="Only edges of this namespace.")
        ] = None,
        as_of: Annotated[datetime | None, strawberry.argument(description=_AS_OF)] = None,
        include_expired: Annotated[bool | None, strawberry.argument(description=_EXPIRED)] = False,
        first: Annotated[
            int | None, strawberry.argument(description="Page size (default 50, at most 500).")
        ] = None,
        after: Annotated[
            str | None,
            strawberry.argument(description="A previous page's endCursor, to go on from there."),
        ] = None,
    ) -> EdgePage:
        page = await find(info, "edges")
        if page is None:
            return EdgePage(items=[], total_count=0, page_info=_EMPTY)
        return edge_page(page, as_of)

    @strawberry.field(
        description="The typed edges into and out of one record, with the records at their "
        "ends (fromRecord, toRecord).",
        metadata=served("related"),
    )
    async def related(
        self,
        info: Info,
        id: Annotated[
            strawberry.ID,
            strawberry.argument(
                description="The record: an id or a unique prefix (6+ hex after sr_)."
            ),
        ],
        namespace: Annotated[
            str | None, strawberry.argument(description="Only edges of this namespace.")
        ] = None,
        as_of: Annotated[datetime | None, strawberry.argument(description=_AS_OF)] = None,
        include_expired: Annotated[bool | None, strawberry.argument(description=_EXPIRED)] = False,
    ) -> Related:
        return Related(
            record_id=strawberry.ID(await find(info, "related")),
            as_of=as_of,
            namespace=namespace,
            include_expired=bool(include_expired),
        )

    @strawberry.field(
        description="The review queue: contradicts edges with both records, who asserted "
        "each and the evidence, the unresolved first, oldest first. Nothing is resolved "
        "on its own: resolve one with resolveConflict.",
        metadata=served("conflicts"),
    )
    async def conflicts(
        self,
        info: Info,
        status: Annotated[
            ConflictStatus | None,
            strawberry.argument(description="UNRESOLVED (default), RESOLVED, or ALL."),
        ] = ConflictStatus.UNRESOLVED,
        lanes: Annotated[
            list[str] | None,
            strawberry.argument(description="Only contradictions from records of these lanes."),
        ] = None,
        first: Annotated[
            int | None, strawberry.argument(description="Page size (default 50, at most 500).")
        ] = None,
        after: Annotated[
            str | None,
            strawberry.argument(description="A previous page's endCursor, to go on from there."),
        ] = None,
    ) -> EdgePage:
        return edge_page(await find(info, "conflicts"))

    @strawberry.field(
        description="The neighbourhood of some records over typed edges, 1 or 2 hops, with "
        "notShown counting everything left out."
    )
    async def ego(
        self,
        info: Info,
        nodes: Annotated[
            list[strawberry.ID],
            strawberry.argument(description="The records to start from: ids or unique prefixes."),
        ],
        hops: Annotated[
            int | None,
            strawberry.argument(description="1 or 2; for more, call ego again from the neighbors."),
        ] = 1,
        direction: Annotated[
            Direction | None,
            strawberry.argument(description="Follow edges OUT of, IN to, or BOTH ways."),
        ] = Direction.BOTH,
        types: Annotated[
            list[str] | None,
            strawberry.argument(
                description="Only edges of these types (others counted typeFiltered)."
            ),
        ] = None,
        limit: Annotated[
            int | None,
            strawberry.argument(
                description="At most this many edges (1 to 1000); the rest counted."
            ),
        ] = 100,
        as_of: Annotated[datetime | None, strawberry.argument(description=_AS_OF)] = None,
        include_expired: Annotated[bool | None, strawberry.argument(description=_EXPIRED)] = False,
    ) -> EgoView:
        depth = 1 if hops is None else hops
        most = 100 if limit is None else limit
        queries.check_ego(depth, most)
        way = (direction or Direction.BOTH).name
        async with info.context.read() as (db, lanes):
            starts: list[str] = []
            dangling: list[str] = []
            for node in nodes:
                try:
                    starts.append(await resolve_id(db, node, lanes, as_of))
                except NotFoundError:
                    dangling.append(node)
            found = await queries.ego(
                db, lanes, starts, depth, way, types, most, as_of, bool(include_expired)
            )
        return EgoView.from_domain(found, dangling, as_of)


@strawberry.type
class EdgeMutation:
    @strawberry.mutation(
        description="Create or update the typed edge on (fromId, toId, type, namespace): "
        "fields left out keep their value, a resolved conflict stays resolved. Needs read "
        "access to both records and write access to the from record's lane."
    )
    async def upsert_edge(
        self,
        info: Info,
        input: Annotated[EdgeInput, strawberry.argument(description="The edge to write.")],
    ) -> Edge:
        return Edge.from_domain(await info.context.execute(input.to_command()))

    @strawberry.mutation(
        description="Retire a typed edge without deleting it: it stops holding at invalidAt "
        "and is recorded as retired now (expiredAt), as a new version. Reads asOf an "
        "earlier time still show it; includeExpired shows it now."
    )
    async def retire_edge(
        self,
        info: Info,
        id: Annotated[strawberry.ID, strawberry.argument(description="The edge: edge_ + 32 hex.")],
        invalid_at: Annotated[
            datetime | None,
            strawberry.argument(description="When it stopped holding (default: now)."),
        ] = None,
    ) -> Edge:
        return Edge.from_domain(await info.context.execute(RetireEdge(id, invalid_at)))

    @strawberry.mutation(
        description="Resolve a contradiction (a contradicts edge): the resolution and the "
        "resolver become its next version; it leaves the unresolved review queue."
    )
    async def resolve_conflict(
        self,
        info: Info,
        edge_id: Annotated[
            strawberry.ID, strawberry.argument(description="The contradicts edge: edge_ + 32 hex.")
        ],
        resolution: Annotated[
            ConflictResolution,
            strawberry.argument(description="ACCEPTED_DUAL, SUPERSEDED, REFUTED or MERGED."),
        ],
        resolver: Annotated[
            str, strawberry.argument(description="Who resolves it (agent or person).")
        ],
        winner_id: Annotated[
            strawberry.ID | None,
            strawberry.argument(
                description="For SUPERSEDED only, and required there: the edge's fromId or toId."
            ),
        ] = None,
    ) -> Edge:
        command = ResolveConflict(edge_id, resolution.name, resolver, winner_id)
        return Edge.from_domain(await info.context.execute(command))
