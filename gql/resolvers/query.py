"""Query resolvers: every read goes through the caller's readable lanes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry

from gql.compiled.fields import compiled
from gql.compiled.plan import (
    bind_edge_property,
    bind_gather,
    bind_labels,
    bind_record,
    bind_records,
)
from gql.policy_types import PolicyVersion, Profile
from gql.resolvers.edges import EdgeQuery
from gql.types import (
    AuditEvent,
    AuditPage,
    EdgeProperty,
    GatherMode,
    Info,
    LabelCount,
    Record,
    RecordPage,
    Traversal,
    asks_for,
    page_info,
    record_page,
    traversal,
)
from policies.properties import parse_property
from store.errors import NotFoundError
from store.feed import audit as audit_reads
from store.kinds.record import queries
from store.kinds.record.labels import label_counts
from store.kinds.record.resolve import resolve_id
from store.kinds.record.traverse import check
from store.kinds.record.traverse import traverse as walk
from store.reads import compiled_sql as sql
from store.reads.visibility import RULE


@strawberry.type
class Query(EdgeQuery):
    @strawberry.field(
        description="One record, as it is or as it was at asOf.",
        metadata=compiled(sql.Compiler.record_root, bind_record),
    )
    async def record(
        self, info: Info, id: strawberry.ID, as_of: datetime | None = None
    ) -> Record | None:
        async with info.context.read() as (db, lanes):
            try:
                record_id = await resolve_id(db, id, lanes)
            except NotFoundError:
                return None
        found = await info.context.records([record_id], as_of)
        return Record.from_domain(found[record_id], as_of) if record_id in found else None

    @strawberry.field(
        description="Browse records in the order they were written.",
        metadata=compiled(sql.Compiler.records_root, bind_records),
    )
    async def records(
        self,
        info: Info,
        lane: str | None = None,
        source_type: str | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> RecordPage:
        count = asks_for(info, "totalCount")
        async with info.context.read() as (db, lanes):
            chosen = RULE.chosen(lanes, None if lane is None else [lane])
            page = await queries.browse(db, chosen, source_type, first, after, count)
        return await record_page(info, page)

    @strawberry.field(
        description="Records by set operations over edge properties.",
        metadata=compiled(sql.Compiler.gather_root, bind_gather),
    )
    async def gather(
        self,
        info: Info,
        match: list[str],
        mode: GatherMode | None = GatherMode.INTERSECT,
        lanes: list[str] | None = None,
        as_of: datetime | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> RecordPage:
        count = asks_for(info, "totalCount")
        async with info.context.read() as (db, readable):
            chosen = RULE.chosen(readable, lanes)
            mode_ = (mode or GatherMode.INTERSECT).to_store()
            page = await queries.gather(db, match, mode_, chosen, as_of, first, after, count)
        return await record_page(info, page, as_of)

    @strawberry.field(
        description="Labels in use with how many readable records carry each.",
        metadata=compiled(sql.Compiler.labels_root, bind_labels),
    )
    async def labels(self, info: Info, lane: str | None = None) -> list[LabelCount]:
        async with info.context.read() as (db, lanes):
            counts = await label_counts(db, lanes, lane)
        return [LabelCount(label=c.label, record_count=c.record_count) for c in counts]

    @strawberry.field(
        description="Walk breadth first from one record over the edges it shares: edge "
        "properties, connections, groups and adjustment chains."
    )
    async def traverse(
        self,
        info: Info,
        from_: Annotated[strawberry.ID, strawberry.argument(name="from")],
        depth: int | None = 1,
        labels: list[str] | None = None,
        as_of: datetime | None = None,
        limit: int | None = 100,
    ) -> Traversal:
        hops = 1 if depth is None else depth
        most = 100 if limit is None else limit
        check(hops, most, labels)
        async with info.context.read() as (conn, lanes):
            start = await resolve_id(conn, from_, lanes)
            found = await walk(conn, start, lanes, hops, labels, as_of, most)
        return await traversal(info, found, as_of)

    @strawberry.field(
        description="The hyperedge label:value, with its readable members.",
        metadata=compiled(sql.Compiler.edge_property_root, bind_edge_property),
    )
    async def edge_property(
        self, info: Info, property: str, as_of: datetime | None = None
    ) -> EdgeProperty | None:
        prop = parse_property(property)
        if await info.context.member_count(prop, as_of) == 0:
            return None
        return EdgeProperty.of(prop, None, as_of)

    @strawberry.field(description="Audit events, oldest first; cursors are feed positions.")
    async def audit(
        self,
        info: Info,
        record_id: strawberry.ID | None = None,
        kinds: list[str] | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> AuditPage:
        async with info.context.read() as (db, lanes):
            rid = None if record_id is None else await resolve_id(db, record_id, lanes)
            page = await audit_reads.audit(db, lanes, rid, kinds, first, after)
        return AuditPage(
            items=[AuditEvent.from_domain(e) for e in page.items],
            total_count=page.total_count or 0,
            page_info=page_info(page),
        )

    @strawberry.field(description="One audit event with the record version before and after it.")
    async def audit_event(self, info: Info, id: strawberry.ID) -> AuditEvent | None:
        async with info.context.read() as (db, lanes):
            event = await audit_reads.audit_event(db, id, lanes)
        return None if event is None else AuditEvent.from_domain(event)

    @strawberry.field(description="The caller's lanes, source types and labels.")
    async def profile(self, info: Info) -> Profile:
        version = await info.context.policy()
        return Profile.from_domain(version.policy, version.version, info.context.agent_name())

    @strawberry.field(description="The policy in force.")
    async def policy(self, info: Info) -> PolicyVersion:
        await info.context.agent()
        return PolicyVersion.from_domain(await info.context.policy())
