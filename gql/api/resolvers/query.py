"""Query resolvers: every read goes through the caller's readable lanes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import strawberry

from gql.api import descriptions as d
from gql.api.compiled.fields import served
from gql.api.label_types import LabelCount, TagCount
from gql.api.page_types import page_info
from gql.api.policy_types import PolicyVersion, Profile
from gql.api.reads import find
from gql.api.resolvers.edges import EdgeQuery
from gql.api.resolvers.search import SearchQuery
from gql.api.traversal_types import Traversal, traversal
from gql.api.types import (
    AuditEvent,
    AuditPage,
    EdgeProperty,
    GatherMode,
    Info,
    Record,
    RecordPage,
    record_page,
)
from store.feed import audit as audit_reads
from store.kinds.record.resolve import resolve_id
from store.kinds.record.tags import tag_counts


def _arg(text: str) -> Any:
    return strawberry.argument(description=text)


@strawberry.type(description="What can be read: records, gathers, walks, history and rights.")
class Query(SearchQuery, EdgeQuery):
    @strawberry.field(
        description="One record, as it is or as it was at asOf; null when no record you "
        "can read has that id. A record retired then (now, without asOf) is refused with "
        "code NOT_FOUND, its message and extensions.retired saying when, by whom and why.",
        metadata=served("record"),
    )
    async def record(
        self,
        info: Info,
        id: Annotated[strawberry.ID, _arg(d.RECORD_ID)],
        as_of: Annotated[datetime | None, _arg(d.AS_OF)] = None,
    ) -> Record | None:
        record_id = await find(info, "record")
        if record_id is None:
            return None
        found = await info.context.records([record_id], as_of)
        return Record.from_domain(found[record_id], as_of) if record_id in found else None

    @strawberry.field(
        description="Browse the records you can read, in the order they were written.",
        metadata=served("records"),
    )
    async def records(
        self,
        info: Info,
        lane: Annotated[str | None, _arg(d.LANE_FILTER)] = None,
        source_type: Annotated[
            str | None, _arg("Only records of this source type; omit it for every type.")
        ] = None,
        first: Annotated[int | None, _arg(d.FIRST)] = None,
        after: Annotated[str | None, _arg(d.AFTER)] = None,
        tag: Annotated[
            str | None, _arg("Only records whose content holds this #tag (with or without #).")
        ] = None,
        named: Annotated[str | None, _arg(d.NAMED)] = None,
    ) -> RecordPage:
        return await record_page(info, await find(info, "records"))

    @strawberry.field(
        description="Records by set operations over edge properties: those carrying every "
        "one (INTERSECT), any one (UNION), or any one ordered by when each joined (TIMELINE). "
        "Reserved e_adjustment values never match here; traverse walks them.",
        metadata=served("gather"),
    )
    async def gather(
        self,
        info: Info,
        match: Annotated[
            list[str],
            _arg("The edge properties (label:value, parsed as on ingest) to combine."),
        ],
        mode: Annotated[
            GatherMode | None, _arg("How to combine them; default INTERSECT.")
        ] = GatherMode.INTERSECT,
        lanes: Annotated[list[str] | None, _arg(d.LANES_FILTER)] = None,
        as_of: Annotated[datetime | None, _arg(d.AS_OF)] = None,
        first: Annotated[int | None, _arg(d.FIRST)] = None,
        after: Annotated[str | None, _arg(d.AFTER)] = None,
    ) -> RecordPage:
        return await record_page(info, await find(info, "gather"), as_of)

    @strawberry.field(
        description="The labels in use, each with how many records you can read carry it "
        "(now, or at asOf), most used first: see which exist before inventing one. Reserved "
        "labels and retired records are left out.",
        metadata=served("labels"),
    )
    async def labels(
        self,
        info: Info,
        lane: Annotated[str | None, _arg(d.LANE_FILTER)] = None,
        as_of: Annotated[
            datetime | None,
            _arg(
                "Count the records that carried each label at this instant (ISO 8601 with a "
                "time zone) instead of now; records retired then are not counted."
            ),
        ] = None,
    ) -> list[LabelCount]:
        counts = await find(info, "labels")
        return [LabelCount(label=c.label, record_count=c.record_count) for c in counts]

    @strawberry.field(
        description="#tags in the content of readable records, with how many records hold "
        "each; an index over the content, never edge properties."
    )
    async def tags(
        self, info: Info, lane: Annotated[str | None, _arg(d.LANE_FILTER)] = None
    ) -> list[TagCount]:
        async with info.context.read() as (db, lanes):
            counts = await tag_counts(db, lanes, lane)
        return [TagCount(tag=c.tag, record_count=c.record_count) for c in counts]

    @strawberry.field(
        description="Walk breadth first from one record over the edges it shares: edge "
        "properties, connections, groups and adjustment chains, and typed edges either way "
        "(the links intake detects among them).",
        metadata=served("traverse"),
    )
    async def traverse(
        self,
        info: Info,
        from_: Annotated[
            strawberry.ID,
            strawberry.argument(name="from", description="Where to start. " + d.RECORD_ID),
        ],
        depth: Annotated[int | None, _arg(d.TRAVERSE_DEPTH)] = 1,
        labels: Annotated[list[str] | None, _arg(d.TRAVERSE_LABELS)] = None,
        as_of: Annotated[datetime | None, _arg(d.AS_OF)] = None,
        limit: Annotated[int | None, _arg(d.TRAVERSE_LIMIT)] = 100,
        edge_types: Annotated[list[str] | None, _arg(d.TRAVERSE_EDGE_TYPES)] = None,
    ) -> Traversal:
        return await traversal(info, await find(info, "traverse"), as_of)

    @strawberry.field(
        description="The hyperedge label:value, with its readable members; null when no "
        "record you can read carries it.",
        metadata=served("edgeProperty"),
    )
    async def edge_property(
        self,
        info: Info,
        property: Annotated[str, _arg("The edge property, label:value (parsed as on ingest).")],
        as_of: Annotated[datetime | None, _arg(d.AS_OF)] = None,
    ) -> EdgeProperty | None:
        carried = await find(info, "edgeProperty")
        # Its memberCount is the count found, not read again.
        info.context.counted(carried.property, as_of, carried.members)
        if carried.members == 0:
            return None
        return EdgeProperty.of(carried.property, None, as_of)

    @strawberry.field(
        description="Audit events you may read, oldest first (feed order); a payload never "
        "names a record you cannot read. Each event's cursor is its feed position."
    )
    async def audit(
        self,
        info: Info,
        record_id: Annotated[
            strawberry.ID | None, _arg("Only the events of this record. " + d.RECORD_ID)
        ] = None,
        kinds: Annotated[
            list[str] | None,
            _arg(
                "Only events of these kinds (sr_ingested, sr_updated, property_added, "
                "property_removed, sr_retired, sr_restored, sr_erased, connected, disconnected, "
                "grouped, ungrouped, adjusted, unadjusted, corrected, policy_applied, and those "
                "of newer kinds); an unknown "
                "kind is refused naming the known ones."
            ),
        ] = None,
        first: Annotated[int | None, _arg(d.FIRST)] = None,
        after: Annotated[
            str | None,
            _arg(
                'An event\'s cursor (its feed position, 1 to 18 digits; "0" is the start): '
                "the events after it."
            ),
        ] = None,
        last: Annotated[
            int | None,
            _arg(
                "The newest events instead of the oldest: how many (1 to 500), still oldest "
                "first, and no page follows them; not with `first`."
            ),
        ] = None,
    ) -> AuditPage:
        async with info.context.read() as (db, lanes):
            # The audit trail is history: a retired record's events stay readable.
            rid = (
                None if record_id is None else await resolve_id(db, record_id, lanes, retired=True)
            )
            page = await audit_reads.audit(db, lanes, rid, kinds, first, after, last)
        return AuditPage(
            items=[AuditEvent.from_domain(e) for e in page.items],
            total_count=page.total_count or 0,
            page_info=page_info(page),
        )

    @strawberry.field(
        description="One audit event with the record version before and after it; null when "
        "you cannot read it."
    )
    async def audit_event(
        self,
        info: Info,
        id: Annotated[
            strawberry.ID,
            _arg("The event id (ae_ + 32 hex), as audit gives; another shape is refused."),
        ],
    ) -> AuditEvent | None:
        async with info.context.read() as (db, lanes):
            event = await audit_reads.audit_event(db, id, lanes)
        return None if event is None else AuditEvent.from_domain(event)

    @strawberry.field(
        description="Who you are and where you may write: your readable and writable lanes "
        "and, for each writable lane, its source types and the labels (and closed values) "
        "each allows."
    )
    async def profile(self, info: Info) -> Profile:
        version = await info.context.policy()
        return Profile.from_domain(version.policy, version.version, info.context.agent_name())

    @strawberry.field(description="The policy in force: its version, YAML, and who applied it.")
    async def policy(self, info: Info) -> PolicyVersion:
        await info.context.agent()
        return PolicyVersion.from_domain(await info.context.policy())
