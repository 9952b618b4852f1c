"""The GraphQL types of typed edges (an `Edge`, its page, a record's `Related` edges, the
`EgoView` neighbourhood) and the input of `upsertEdge`, built from the store's `Edge`."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated

import strawberry

from gql.api import descriptions as d
from gql.api.compiled.fields import compiled
from gql.api.page_types import PageInfo, page_info
from gql.api.scalars import JSON
from gql.api.types import Info, Record
from store.kinds.edge import compiled as edge_sql
from store.kinds.edge import model as domain
from store.kinds.edge import queries
from store.kinds.edge.commands import UpsertEdge
from store.kinds.edge.queries import Ego
from store.kinds.edge.reads import related as related_sql
from store.reads import compiled_sql as sql
from store.reads.pages import Page


@strawberry.enum(description="How a contradiction was resolved.")
class ConflictResolution(enum.Enum):
    ACCEPTED_DUAL = strawberry.enum_value(
        "ACCEPTED_DUAL", description="both records stand: each is right in its own terms"
    )
    SUPERSEDED = strawberry.enum_value(
        "SUPERSEDED", description="one record wins (winnerId) and supersedes the other"
    )
    REFUTED = strawberry.enum_value("REFUTED", description="the contradiction does not hold")
    MERGED = strawberry.enum_value("MERGED", description="the two were merged into one account")


@strawberry.enum(description="Which contradictions the review queue lists.")
class ConflictStatus(enum.Enum):
    UNRESOLVED = strawberry.enum_value("UNRESOLVED", description="awaiting a resolver")
    RESOLVED = strawberry.enum_value("RESOLVED", description="resolved already")
    ALL = strawberry.enum_value("ALL", description="both, the unresolved first")


@strawberry.enum(description="Which edges of a record ego follows.")
class Direction(enum.Enum):
    OUT = strawberry.enum_value("OUT", description="edges from the record")
    IN = strawberry.enum_value("IN", description="edges to the record")
    BOTH = strawberry.enum_value("BOTH", description="edges either way")


@strawberry.type(
    description="A typed edge between two records: its type, weight, who asserted it and "
    "how (provenance, detector, confidence), the evidence that shows it, its conflict "
    "state when it is a contradiction, and when it held (validAt until invalidAt)."
)
class Edge:
    id: strawberry.ID = strawberry.field(
        description="The edge's id: edge_ + 32 hex.", metadata=compiled(sql.column("id"))
    )
    from_id: strawberry.ID = strawberry.field(
        description="The record the edge goes from.", metadata=compiled(sql.column("from_id"))
    )
    to_id: strawberry.ID = strawberry.field(
        description="The record the edge goes to.", metadata=compiled(sql.column("to_id"))
    )
    type: str = strawberry.field(
        description="What the edge says, e.g. supports, contradicts, derived_from, related_to.",
        metadata=compiled(sql.column("type")),
    )
    weight: float = strawberry.field(
        description="How strong the edge is, 0 to 1.", metadata=compiled(edge_sql.number("weight"))
    )
    namespace: str = strawberry.field(
        description="The namespace the edge belongs to; part of its key with both ends and "
        "the type.",
        metadata=compiled(sql.column("namespace")),
    )
    confidence: float | None = strawberry.field(
        description="How sure whoever wrote it is, 0 to 1; null when not stated.",
        metadata=compiled(edge_sql.number("confidence")),
    )
    detector: str = strawberry.field(
        description="What found or made the edge, with its version; manual@1 for one "
        "asserted by hand.",
        metadata=compiled(sql.column("detector")),
    )
    provenance_actor: str = strawberry.field(
        description="The agent, person or rule that wrote the edge.",
        metadata=compiled(sql.column("provenance_actor")),
    )
    provenance_type: str = strawberry.field(
        description="How the edge came to be: human, agent, rule, frontmatter, inferred or "
        "detected.",
        metadata=compiled(sql.column("provenance_type")),
    )
    evidence: JSON | None = strawberry.field(
        description="What shows the edge: an object or a list of objects (quote, source, "
        "offset when it quotes a text); null for an edge asserted without evidence.",
        metadata=compiled(edge_sql.evidence),
    )
    conflict_state: str | None = strawberry.field(
        description="For a contradicts edge: unresolved, or once resolved its resolution in "
        "lower case (accepted_dual, superseded, refuted, merged); null for other types.",
        metadata=compiled(edge_sql.conflict_state),
    )
    resolution: ConflictResolution | None = strawberry.field(
        description="How the contradiction was resolved; null while unresolved.",
        metadata=compiled(sql.column("resolution")),
    )
    resolver: str | None = strawberry.field(
        description="Who resolved the contradiction; null while unresolved.",
        metadata=compiled(sql.column("resolver")),
    )
    winner_id: strawberry.ID | None = strawberry.field(
        description="The record that superseded the other (resolution SUPERSEDED).",
        metadata=compiled(sql.column("winner_id")),
    )
    valid_at: datetime = strawberry.field(
        description="When the edge began to hold.", metadata=compiled(sql.time("valid_at"))
    )
    invalid_at: datetime | None = strawberry.field(
        description="When the edge stopped holding (set by retireEdge); null: it still holds.",
        metadata=compiled(sql.time("invalid_at")),
    )
    expired_at: datetime | None = strawberry.field(
        description="When the edge was retired (recorded as no longer holding); null: live.",
        metadata=compiled(sql.time("expired_at")),
    )
    created_at: datetime = strawberry.field(
        description="When the edge was first written.", metadata=compiled(sql.time("created_at"))
    )
    updated_at: datetime = strawberry.field(
        description="When the version read here was written.",
        metadata=compiled(sql.time("updated_at")),
    )
    version: int = strawberry.field(
        description="The edge's version, from 1.", metadata=compiled(sql.column("version"))
    )
    as_of: strawberry.Private[datetime | None]

    @strawberry.field(
        description="The record the edge goes from, as it was at the read's asOf.",
        metadata=compiled(edge_sql.from_record),
    )
    async def from_record(self, info: Info) -> Record | None:
        return await _record(info, self.from_id, self.as_of)

    @strawberry.field(
        description="The record the edge goes to, as it was at the read's asOf.",
        metadata=compiled(edge_sql.to_record),
    )
    async def to_record(self, info: Info) -> Record | None:
        return await _record(info, self.to_id, self.as_of)

    @classmethod
    def from_domain(cls, e: domain.Edge, as_of: datetime | None = None) -> Edge:
        return cls(
            id=strawberry.ID(e.id),
            from_id=strawberry.ID(e.from_id),
            to_id=strawberry.ID(e.to_id),
            type=e.type,
            weight=e.weight,
            namespace=e.namespace,
            confidence=e.confidence,
            detector=e.detector,
            provenance_actor=e.provenance_actor,
            provenance_type=e.provenance_type,
            evidence=None if e.evidence is None else JSON(e.evidence),
            conflict_state=e.conflict,
            resolution=None if e.resolution is None else ConflictResolution(e.resolution),
            resolver=e.resolver,
            winner_id=None if e.winner_id is None else strawberry.ID(e.winner_id),
            valid_at=e.valid_at,
            invalid_at=e.invalid_at,
            expired_at=e.expired_at,
            created_at=e.created_at,
            updated_at=e.updated_at,
            version=e.version,
            as_of=as_of,
        )


async def _record(info: Info, record_id: str, as_of: datetime | None) -> Record | None:
    found = await info.context.records([record_id], as_of)
    return Record.from_domain(found[record_id], as_of) if record_id in found else None


@strawberry.type(description="A page of typed edges, with the total size of the whole list.")
class EdgePage:
    items: list[Edge] = strawberry.field(
        description="The edges of this page.", metadata=compiled(edge_sql.edge_items)
    )
    total_count: int = strawberry.field(
        description="How many edges the whole list holds.",
        metadata=compiled(sql.Compiler.total_count),
    )
    page_info: PageInfo = strawberry.field(
        description="Where the next page starts.", metadata=compiled(sql.Compiler.page_info)
    )


def edge_page(page: Page[domain.Edge], as_of: datetime | None = None) -> EdgePage:
    return EdgePage(
        items=[Edge.from_domain(e, as_of) for e in page.items],
        total_count=page.total_count or 0,
        page_info=page_info(page),
    )


@strawberry.type(description="The typed edges into and out of one record.")
class Related:
    record_id: strawberry.ID = strawberry.field(
        description="The record asked about (full id).", metadata=compiled(related_sql.related_id)
    )
    as_of: strawberry.Private[datetime | None]
    namespace: strawberry.Private[str | None] = None
    include_expired: strawberry.Private[bool] = False

    @strawberry.field(
        description="Edges from the record, oldest first, a page at a time with the total "
        "count; each edge's toRecord is the other end. Of a file's record (a note intake "
        "wrote), the edges from the note: from its record and its parts (sections) to "
        "records outside it.",
        metadata=compiled(related_sql.related_outgoing, related_sql.bind_end_page),
    )
    async def outgoing(
        self,
        info: Info,
        first: Annotated[int | None, strawberry.argument(description=d.FIRST)] = None,
        after: Annotated[str | None, strawberry.argument(description=d.AFTER)] = None,
    ) -> EdgePage:
        return await self._page(info, {"note_from": self.record_id}, first, after)

    @strawberry.field(
        description="Edges to the record, oldest first, a page at a time with the total "
        "count; each edge's fromRecord is the other end. Of a file's record, the edges "
        "into the note (its record and its parts) from records outside it.",
        metadata=compiled(related_sql.related_incoming, related_sql.bind_end_page),
    )
    async def incoming(
        self,
        info: Info,
        first: Annotated[int | None, strawberry.argument(description=d.FIRST)] = None,
        after: Annotated[str | None, strawberry.argument(description=d.AFTER)] = None,
    ) -> EdgePage:
        return await self._page(info, {"note_to": self.record_id}, first, after)

    async def _page(
        self, info: Info, end: dict[str, str], first: int | None, after: str | None
    ) -> EdgePage:
        # The edges of one end are the list `edges(fromId:)` or `edges(toId:)` gives.
        async with info.context.read() as (db, lanes):
            page = await queries.list_edges(
                db,
                lanes,
                **end,
                namespace=self.namespace,
                as_of=self.as_of,
                include_expired=self.include_expired,
                first=first,
                after=after,
            )
        return edge_page(page, self.as_of)

    @strawberry.field(
        description="The record asked about.", metadata=compiled(related_sql.related_record)
    )
    async def record(self, info: Info) -> Record | None:
        return await _record(info, self.record_id, self.as_of)


@strawberry.type(
    description="What ego left out, counted by why; an edge to a record you cannot read "
    "is counted nowhere."
)
class EgoNotShown:
    expired_excluded: int = strawberry.field(
        description="Edges no longer valid at asOf (retired); includeExpired: true shows them."
    )
    edges_clipped: int = strawberry.field(
        description="Edges past limit, the weakest of the outermost hop first."
    )
    type_filtered: int = strawberry.field(description="Edges of types not in `types`.")
    dangling_ids: list[strawberry.ID] = strawberry.field(
        description="Ids in `nodes` that name no record you can read."
    )


@strawberry.type(
    description="The neighbourhood of some records over typed edges: the edges by hop, "
    "the records they reach, and what was left out (never a silent cut)."
)
class EgoView:
    edges: list[Edge] = strawberry.field(
        description="The edges, sorted by hop, then weight (strongest first), then id."
    )
    hops: list[int] = strawberry.field(
        description="The hop of each edge in `edges`, in the same order: 1 for an edge of a "
        "starting node, 2 for one beyond."
    )
    neighbor_ids: strawberry.Private[list[str]]
    not_shown: EgoNotShown = strawberry.field(description="What was left out, by why.")
    as_of: strawberry.Private[datetime | None]

    @strawberry.field(
        description="The records the shown edges reach beyond the starting nodes, nearest first."
    )
    async def neighbors(self, info: Info) -> list[Record]:
        found = await info.context.records(list(self.neighbor_ids), self.as_of)
        return [Record.from_domain(found[i], self.as_of) for i in self.neighbor_ids if i in found]

    @classmethod
    def from_domain(cls, ego: Ego, dangling: list[str], as_of: datetime | None) -> EgoView:
        return cls(
            edges=[Edge.from_domain(e, as_of) for _, e in ego.edges],
            hops=[h for h, _ in ego.edges],
            neighbor_ids=list(ego.neighbors),
            not_shown=EgoNotShown(
                expired_excluded=ego.expired_excluded,
                edges_clipped=ego.edges_clipped,
                type_filtered=ego.type_filtered,
                dangling_ids=[strawberry.ID(i) for i in dangling],
            ),
            as_of=as_of,
        )


@strawberry.input(
    description="A typed edge to write: created on its key (fromId, toId, type, namespace), "
    "or updated there; a field left out keeps its value (a new edge takes its default)."
)
class EdgeInput:
    from_id: strawberry.ID = strawberry.field(
        description="The record the edge goes from: an id or a unique prefix (6+ hex after sr_)."
    )
    to_id: strawberry.ID = strawberry.field(
        description="The record the edge goes to: an id or a unique prefix."
    )
    type: str = strawberry.field(
        description="What the edge says, e.g. supports, contradicts, derived_from, related_to."
    )
    weight: float | None = strawberry.field(
        default=None, description="0 to 1 (out of range is refused, never clamped); new: 1."
    )
    namespace: str | None = strawberry.field(
        default=None, description="The namespace of the edge, part of its key; new: default."
    )
    provenance_actor: str | None = strawberry.field(
        default=None, description="Who wrote the edge; new: you (the calling agent)."
    )
    provenance_type: str | None = strawberry.field(
        default=None,
        description="human, agent, rule, frontmatter, inferred or detected; new: agent. An "
        "inferred write never overwrites an edge asserted by a human, agent or rule, nor a "
        "resolved one.",
    )
    evidence: JSON | None = strawberry.field(
        default=None,
        description="An object or a list of objects, e.g. {quote, source, offset}; a scalar "
        "is refused. Numbers in it are integers.",
    )
    conflict_state: str | None = strawberry.field(
        default=None,
        description="Only 'unresolved', on a contradicts edge, to reopen a resolved one "
        "(new contradicts edges start unresolved); resolve with resolveConflict.",
    )
    confidence: float | None = strawberry.field(
        default=None, description="How sure you are, 0 to 1; new: null (not stated)."
    )
    detector: str | None = strawberry.field(
        default=None, description="What found or made the edge, e.g. wikilink@2; new: manual@1."
    )
    valid_at: datetime | None = strawberry.field(
        default=None, description="When the edge began to hold; new: now."
    )

    def to_command(self) -> UpsertEdge:
        return UpsertEdge(
            from_id=self.from_id,
            to_id=self.to_id,
            type=self.type,
            namespace=self.namespace or domain.DEFAULT_NAMESPACE,
            weight=self.weight,
            confidence=self.confidence,
            provenance_actor=self.provenance_actor,
            provenance_type=self.provenance_type,
            evidence=self.evidence,
            conflict_state=self.conflict_state,
            detector=self.detector,
            valid_at=self.valid_at,
        )
