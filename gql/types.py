"""The GraphQL object types, each built from a store dataclass with `from_domain`."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import strawberry
from strawberry.types.nodes import SelectedField

from gql.compiled.fields import compiled
from gql.compiled.plan import bind_members
from gql.context import Context
from gql.scalars import JSON
from policies.model import Lane as LaneModel
from policies.model import Policy
from policies.properties import Property
from store import commands, queries
from store import compiled_sql as sql
from store import records as domain
from store.ids import ADJUSTMENT, CONNECT, GROUP, edge_property_id
from store.pages import Page
from store.policy_store import PolicyVersion as PolicyVersionModel

if TYPE_CHECKING:
    from gql.asserted_types import AdjustmentChain, Connection, Correction, Group

T = TypeVar("T")
Info = strawberry.Info[Context, None]
_ASSERTED = strawberry.lazy("gql.asserted_types")


@strawberry.enum(description="How gather combines the edge properties it is given.")
class GatherMode(enum.Enum):
    INTERSECT = strawberry.enum_value("INTERSECT", description="records carrying every one")
    UNION = strawberry.enum_value("UNION", description="records carrying any one")
    TIMELINE = strawberry.enum_value(
        "TIMELINE", description="the union, ordered by when each record joined the edge"
    )

    def to_store(self) -> queries.GatherMode:
        return queries.GatherMode(self.value)


@strawberry.type
class PageInfo:
    has_next_page: bool = strawberry.field(metadata=compiled(sql.Compiler.has_next_page))
    end_cursor: str | None = strawberry.field(
        description="Pass as `after` for the next page; null when the page is empty.",
        metadata=compiled(sql.Compiler.end_cursor),
    )


@strawberry.type(description="A page of records, with the total size of the whole list.")
class RecordPage:
    items: list[Record] = strawberry.field(metadata=compiled(sql.Compiler.items))
    total_count: int = strawberry.field(metadata=compiled(sql.Compiler.total_count))
    page_info: PageInfo = strawberry.field(metadata=compiled(sql.Compiler.page_info))


@strawberry.type(description="A page of audit events, oldest first.")
class AuditPage:
    items: list[AuditEvent]
    total_count: int
    page_info: PageInfo


def page_info(page: Page[T]) -> PageInfo:
    return PageInfo(has_next_page=page.has_next_page, end_cursor=page.end_cursor)


def asks_for(info: Info, name: str) -> bool:
    """Whether the field being resolved selects `name` directly (through fragments too).

    Used to skip work nobody reads, such as a page's total count; when a directive
    (@include, @skip) could decide it, the answer is yes.
    """
    pending: list[Any] = list(info.selected_fields)
    while pending:
        selection = pending.pop()
        if getattr(selection, "directives", None):
            return True
        for child in selection.selections:
            if getattr(child, "directives", None):
                return True
            if isinstance(child, SelectedField):
                if child.name == name:
                    return True
            else:  # a fragment spread or an inline fragment: its fields are ours
                pending.append(child)
    return False


async def record_page(info: Info, page: Page[str], as_of: datetime | None = None) -> RecordPage:
    """Load the records of a page of ids in one batch, keeping the page's order."""
    found = await info.context.records(page.items, as_of)
    items = [Record.from_domain(found[i], as_of) for i in page.items if i in found]
    # A count that was not computed was not selected either, so it is never shown.
    total = page.total_count if page.total_count is not None else 0
    return RecordPage(items=items, total_count=total, page_info=page_info(page))


@strawberry.type(
    description="A hyperedge: the one N-ary edge joining every record that carries label:value."
)
class EdgeProperty:
    id: strawberry.ID | None = strawberry.field(
        description="The ep_ id of this declaration on one record; null for the hyperedge itself.",
        metadata=compiled(sql.edge_id),
    )
    property: str = strawberry.field(
        description="The edge property as label:value.", metadata=compiled(sql.edge_property)
    )
    label: str = strawberry.field(metadata=compiled(sql.edge_label))
    value: str = strawberry.field(metadata=compiled(sql.edge_value))
    as_of: strawberry.Private[datetime | None]

    @strawberry.field(
        description="How many readable records carry it.",
        metadata=compiled(sql.Compiler.edge_member_count),
    )
    async def member_count(self, info: Info) -> int:
        return await info.context.member_count(Property(self.label, self.value), self.as_of)

    @strawberry.field(
        description="The readable records that carry it, by id.",
        metadata=compiled(sql.Compiler.members, bind_members),
    )
    async def members(
        self, info: Info, first: int | None = None, after: str | None = None
    ) -> RecordPage:
        prop = Property(self.label, self.value)
        count = asks_for(info, "totalCount")
        async with info.context.read() as (db, lanes):
            page = await queries.edge_property_members(
                db, prop, lanes, self.as_of, first, after, count
            )
        return await record_page(info, page, self.as_of)

    @classmethod
    def of(cls, prop: Property, record_id: str | None, as_of: datetime | None) -> EdgeProperty:
        ident = None if record_id is None else edge_property_id(record_id, prop.label, prop.value)
        return cls(
            id=strawberry.ID(ident) if ident else None,
            property=str(prop),
            label=prop.label,
            value=prop.value,
            as_of=as_of,
        )


@strawberry.type(description="One version of a record: its whole state after one change.")
class Version:
    number: int = strawberry.field(metadata=compiled(sql.column("version")))
    at: datetime = strawberry.field(metadata=compiled(sql.time("at")))
    event: str = strawberry.field(metadata=compiled(sql.column("event")))
    actor: str = strawberry.field(metadata=compiled(sql.column("actor")))
    content: str = strawberry.field(metadata=compiled(sql.state("content")))
    properties: list[str] = strawberry.field(metadata=compiled(sql.Compiler.version_properties))
    lane: str = strawberry.field(metadata=compiled(sql.state("lane")))
    source_type: str = strawberry.field(metadata=compiled(sql.state("source_type")))
    authority: str = strawberry.field(metadata=compiled(sql.state("authority")))
    policy_version: int = strawberry.field(metadata=compiled(sql.column("policy_version")))
    hash: str = strawberry.field(
        description="The ledger entry's hash (chained per record).",
        metadata=compiled(sql.column("hash")),
    )

    @classmethod
    def from_domain(cls, v: domain.Version) -> Version:
        return cls(
            number=v.number,
            at=v.at,
            event=v.event,
            actor=v.actor,
            content=v.state.content,
            properties=[str(p) for p in domain.declared(v.state.properties)],
            lane=v.state.lane,
            source_type=v.state.source_type,
            authority=v.state.authority,
            policy_version=v.policy_version,
            hash=v.hash,
        )


@strawberry.type(description="A record in memory, as it is now or as it was at asOf.")
class Record:
    id: strawberry.ID = strawberry.field(metadata=compiled(sql.record_column("id")))
    lane: str = strawberry.field(metadata=compiled(sql.record_column("lane")))
    source_type: str = strawberry.field(metadata=compiled(sql.record_column("source_type")))
    authority: str = strawberry.field(metadata=compiled(sql.record_column("authority")))
    content: str = strawberry.field(metadata=compiled(sql.record_column("content")))
    version: int = strawberry.field(metadata=compiled(sql.record_column("version")))
    created_at: datetime = strawberry.field(metadata=compiled(sql.record_column("created_at")))
    updated_at: datetime = strawberry.field(metadata=compiled(sql.record_column("updated_at")))
    created_by: str = strawberry.field(metadata=compiled(sql.record_column("created_by")))
    properties: list[str] = strawberry.field(
        description="The caller-written edge properties as label:value strings.",
        metadata=compiled(sql.Compiler.record_properties),
    )
    _model: strawberry.Private[domain.Record]
    _as_of: strawberry.Private[datetime | None]

    @strawberry.field(
        description="Its edge properties as hyperedges, with their members.",
        metadata=compiled(sql.Compiler.edge_properties),
    )
    def edge_properties(self) -> list[EdgeProperty]:
        return [
            EdgeProperty.of(p, self._model.id, self._as_of)
            for p in domain.visible(self._model.state.properties)
        ]

    @strawberry.field(
        description="Every version, oldest first (up to asOf when given).",
        metadata=compiled(sql.Compiler.versions),
    )
    async def versions(self, info: Info) -> list[Version]:
        history = await info.context.versions(self._model.id)
        return [Version.from_domain(v) for v in history if v.number <= self.version]

    # Asserted edges and corrections live in gql.asserted_types, which imports this module.
    @strawberry.field(
        description="The connections (e_connect) it is on.",
        metadata=compiled(sql.asserted_on(CONNECT)),
    )
    async def connections(self, info: Info) -> list[Annotated[Connection, _ASSERTED]]:
        from gql import asserted_types

        return await asserted_types.on_record(info, self._model, self._as_of, CONNECT)  # type: ignore[return-value]

    @strawberry.field(
        description="The groups (e_group) it is a member of.",
        metadata=compiled(sql.asserted_on(GROUP)),
    )
    async def groups(self, info: Info) -> list[Annotated[Group, _ASSERTED]]:
        from gql import asserted_types

        return await asserted_types.on_record(info, self._model, self._as_of, GROUP)  # type: ignore[return-value]

    @strawberry.field(
        description="The adjustment chains (e_adjustment) it is on.",
        metadata=compiled(sql.asserted_on(ADJUSTMENT)),
    )
    async def adjustments(self, info: Info) -> list[Annotated[AdjustmentChain, _ASSERTED]]:
        from gql import asserted_types

        return await asserted_types.on_record(info, self._model, self._as_of, ADJUSTMENT)  # type: ignore[return-value]

    @strawberry.field(
        description="Corrections attached to it, oldest first; it stays as written.",
        metadata=compiled(sql.Compiler.corrections),
    )
    async def corrections(self, info: Info) -> list[Annotated[Correction, _ASSERTED]]:
        from gql import asserted_types

        return await asserted_types.corrections(info, self._model.id, self._as_of)

    @strawberry.field(
        description="Whether any correction is attached to it.",
        metadata=compiled(sql.Compiler.corrected),
    )
    async def corrected(self, info: Info) -> bool:
        return bool(await self.corrections(info))

    @classmethod
    def from_domain(cls, r: domain.Record, as_of: datetime | None = None) -> Record:
        return cls(
            id=strawberry.ID(r.id),
            lane=r.state.lane,
            source_type=r.state.source_type,
            authority=r.state.authority,
            content=r.state.content,
            version=r.version,
            created_at=r.created_at,
            updated_at=r.updated_at,
            created_by=r.created_by,
            properties=[str(p) for p in domain.declared(r.state.properties)],
            _model=r,
            _as_of=as_of,
        )


@strawberry.type
class LabelCount:
    label: str = strawberry.field(metadata=compiled(sql.column("label")))
    record_count: int = strawberry.field(metadata=compiled(sql.column("record_count")))


@strawberry.type(description="What addProperties or removeProperties did, value by value.")
class PropertyChange:
    record: Record
    added: list[str]
    already_held: list[str] = strawberry.field(description="Values the record already carried.")
    rejected: list[str] = strawberry.field(description="Reserved (e_*) labels, skipped.")
    removed: list[str]
    not_held: list[str] = strawberry.field(
        description="Labels or values asked to be removed that the record did not carry."
    )

    @classmethod
    def from_domain(cls, change: commands.PropertyChange) -> PropertyChange:
        return cls(
            record=Record.from_domain(change.record),
            added=change.added,
            already_held=change.already_held,
            rejected=change.rejected,
            removed=change.removed,
            not_held=change.not_held,
        )


@strawberry.type(description="One audit event; `before` and `after` are the record's versions.")
class AuditEvent:
    id: strawberry.ID
    cursor: str = strawberry.field(description="Its position in the feed; pass as `after`.")
    kind: str
    record_id: strawberry.ID | None
    lane: str | None
    actor: str
    at: datetime
    payload: JSON
    _model: strawberry.Private[domain.AuditEvent]

    @strawberry.field(description="The record's version before the change (null for a new one).")
    async def before(self, info: Info) -> Version | None:
        return await self._version(info, self._model.version_before)

    @strawberry.field(description="The record's version the change wrote.")
    async def after(self, info: Info) -> Version | None:
        return await self._version(info, self._model.version_after)

    async def _version(self, info: Info, number: int | None) -> Version | None:
        # A correction's event numbers the correction's entry, not a record version.
        if number is None or self._model.record_id is None or self._model.object_kind != "record":
            return None
        history = await info.context.versions(self._model.record_id)
        return next((Version.from_domain(v) for v in history if v.number == number), None)

    @classmethod
    def from_domain(cls, e: domain.AuditEvent) -> AuditEvent:
        return cls(
            id=strawberry.ID(e.id),
            cursor=str(e.seq),
            kind=e.kind,
            record_id=strawberry.ID(e.record_id) if e.record_id else None,
            lane=e.lane,
            actor=e.actor,
            at=e.at,
            payload=JSON(dict(e.payload)),
            _model=e,
        )


@strawberry.type(description="A label a source type allows; `values` null means any value.")
class LabelRule:
    label: str
    values: list[str] | None


@strawberry.type(description="A source type a lane offers, with what its records may carry.")
class SourceTypeInfo:
    name: str
    authority: str
    labels: list[LabelRule] | None = strawberry.field(
        description="The labels allowed; null on an open lane, where any label is allowed."
    )
    content_format: str | None
    required_keys: list[str]


@strawberry.type(description="One lane the caller may read or write.")
class LaneAccess:
    lane: str
    readable: bool
    writable: bool
    open: bool = strawberry.field(description="True when the lane declares no source types.")
    source_types: list[SourceTypeInfo] = strawberry.field(
        description="For a writable lane, the source types it offers (empty if not writable)."
    )


@strawberry.type(description="Who the caller is and where it may read and write.")
class Profile:
    agent: str
    read_lanes: list[str]
    write_lanes: list[str]
    can_apply_policy: bool
    policy_version: int
    lanes: list[LaneAccess]

    @classmethod
    def from_domain(cls, policy: Policy, version: int, agent_name: str) -> Profile:
        agent = policy.agent(agent_name)
        readable = agent.readable_lanes(policy)
        writable = agent.writable_lanes(policy)
        lanes = [
            _lane_access(policy.lanes[name], name in readable, name in writable)
            for name in policy.lane_names()
            if name in readable or name in writable
        ]
        return cls(
            agent=agent.name,
            read_lanes=readable,
            write_lanes=writable,
            can_apply_policy=agent.apply_policy,
            policy_version=version,
            lanes=lanes,
        )


def _lane_access(lane: LaneModel, readable: bool, writable: bool) -> LaneAccess:
    offered = lane.offered_source_types() if writable else []
    return LaneAccess(
        lane=lane.name,
        readable=readable,
        writable=writable,
        open=lane.is_open,
        source_types=[
            SourceTypeInfo(
                name=st.name,
                authority=st.authority,
                labels=None
                if lane.is_open
                else [
                    LabelRule(label=r.label, values=list(r.values) if r.values else None)
                    for r in st.labels
                ],
                content_format=st.content_format,
                required_keys=list(st.required_keys),
            )
            for st in offered
        ],
    )


@strawberry.type(description="An applied policy version.")
class PolicyVersion:
    version: int
    yaml: str
    applied_at: datetime
    applied_by: str

    @classmethod
    def from_domain(cls, p: PolicyVersionModel) -> PolicyVersion:
        return cls(version=p.version, yaml=p.yaml, applied_at=p.applied_at, applied_by=p.applied_by)
