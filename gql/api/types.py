"""The GraphQL types of records and what joins them (edge properties, asserted edges),
pages of records and audit events, each built from a store dataclass with `from_domain`.

They refer to one another (a record's groups list their records), so they share a module;
the types that hold no record (versions, corrections, page info, label counts) have their
own."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

import strawberry
from strawberry.types.nodes import SelectedField

from gql.api import descriptions as d
from gql.api.compiled.fields import compiled
from gql.api.context import Context
from gql.api.correction_types import Correction, corrections
from gql.api.page_types import PageInfo, page_info
from gql.api.record_parts import Retirement, Version, Warning
from gql.api.scalars import JSON
from policies.properties import Property, parse_property
from store.errors import NotFoundError
from store.ids import ADJUSTMENT, CONNECT, GROUP, edge_property_id
from store.kinds.record import asserted, commands
from store.kinds.record import compiled as record_sql
from store.kinds.record import model as domain
from store.kinds.record.reads import gather as gather_read
from store.kinds.record.reads import values
from store.ledger import audit
from store.reads import compiled_sql as sql
from store.reads import gather_mode
from store.reads.pages import Page

Info = strawberry.Info[Context, None]


@strawberry.enum(description="How gather combines the edge properties it is given.")
class GatherMode(enum.Enum):
    INTERSECT = strawberry.enum_value("INTERSECT", description="records carrying every one")
    UNION = strawberry.enum_value("UNION", description="records carrying any one")
    TIMELINE = strawberry.enum_value(
        "TIMELINE", description="the union, ordered by when each record joined the edge"
    )

    def to_store(self) -> gather_mode.GatherMode:
        return gather_mode.GatherMode(self.value)


@strawberry.type(description="A page of records, with the total size of the whole list.")
class RecordPage:
    items: list[Record] = strawberry.field(
        description="The records of this page, in the order of the list.",
        metadata=compiled(record_sql.items),
    )
    total_count: int = strawberry.field(
        description="How many items the whole list holds, every page together.",
        metadata=compiled(sql.Compiler.total_count),
    )
    page_info: PageInfo = strawberry.field(
        description="Whether more follow, and the cursor to read them.",
        metadata=compiled(sql.Compiler.page_info),
    )


@strawberry.type(description="A page of audit events, oldest first.")
class AuditPage:
    items: list[AuditEvent] = strawberry.field(description="The events of this page, oldest first.")
    total_count: int = strawberry.field(description="How many events the whole list holds.")
    page_info: PageInfo = strawberry.field(
        description="Whether more follow, and the cursor to read them."
    )


def asks_for(info: Info, *path: str) -> bool:
    """Whether the field being resolved selects the field at `path` (a name, or names
    each under the one before: "items", "highlights"), through fragments too.

    Used to skip work nobody reads, such as a page's total count; when a directive
    (@include, @skip) could decide it, the answer is yes.
    """
    level: list[Any] = list(info.selected_fields)
    for name in path:
        pending, found = level, []
        while pending:
            selection = pending.pop()
            if getattr(selection, "directives", None):
                return True
            for child in selection.selections:
                if getattr(child, "directives", None):
                    return True
                if isinstance(child, SelectedField):
                    if child.name == name:
                        found.append(child)
                else:  # a fragment spread or an inline fragment: its fields are ours
                    pending.append(child)
        if not found:
            return False
        level = found
    return True


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
    label: str = strawberry.field(
        description="The part before the first colon.", metadata=compiled(sql.edge_label)
    )
    value: str = strawberry.field(
        description="The part after the first colon.", metadata=compiled(sql.edge_value)
    )
    as_of: strawberry.Private[datetime | None]

    @strawberry.field(
        description="How many readable records carry it.",
        metadata=compiled(record_sql.edge_member_count),
    )
    async def member_count(self, info: Info) -> int:
        return await info.context.member_count(Property(self.label, self.value), self.as_of)

    @strawberry.field(
        description="The readable records that carry it, by id.",
        metadata=compiled(gather_read.member_page, gather_read.bind_members),
    )
    async def members(
        self,
        info: Info,
        first: Annotated[int | None, strawberry.argument(description=d.FIRST)] = None,
        after: Annotated[str | None, strawberry.argument(description=d.AFTER)] = None,
    ) -> RecordPage:
        prop = Property(self.label, self.value)
        count = asks_for(info, "totalCount")
        async with info.context.read() as (db, lanes):
            page = await gather_read.members(db, prop, lanes, self.as_of, first, after, count)
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


@strawberry.type(description="A record in memory, as it is now or as it was at asOf.")
class Record:
    id: strawberry.ID = strawberry.field(
        description="The record id, sr_ + 32 hex; a unique prefix of 6 or more hex "
        "characters after sr_ also finds it.",
        metadata=compiled(sql.record_column("id")),
    )
    lane: str = strawberry.field(
        description="The lane it lives in; who may read and write it follows from the lane.",
        metadata=compiled(sql.record_column("lane")),
    )
    source_type: str = strawberry.field(
        description="Its source type (conversational, documentary, or one its lane declares).",
        metadata=compiled(sql.record_column("source_type")),
    )
    authority: str = strawberry.field(
        description="How far it is to be trusted, fixed by its source type.",
        metadata=compiled(sql.record_column("authority")),
    )
    content: str = strawberry.field(
        description="Its text as last written (as of asOf when given).",
        metadata=compiled(sql.record_column("content")),
    )
    version: int = strawberry.field(
        description="Its version number: 1 when written, one more with each change.",
        metadata=compiled(sql.record_column("version")),
    )
    created_at: datetime = strawberry.field(
        description="When version 1 was written.",
        metadata=compiled(sql.record_column("created_at")),
    )
    updated_at: datetime = strawberry.field(
        description="When the version shown was written.",
        metadata=compiled(sql.record_column("updated_at")),
    )
    created_by: str = strawberry.field(
        description="The agent who wrote version 1.",
        metadata=compiled(sql.record_column("created_by")),
    )
    expires_at: datetime | None = strawberry.field(
        description="When it expires (null: never): from then on every read treats it as "
        "retired. Set by expiresAt, or by its lane's ttl.",
        metadata=compiled(sql.record_column("expires_at")),
    )
    properties: list[str] = strawberry.field(
        description="The caller-written edge properties as label:value strings.",
        metadata=compiled(sql.Compiler.record_properties),
    )
    metadata: JSON = strawberry.field(
        description=d.METADATA, metadata=compiled(sql.Compiler.record_metadata)
    )
    _model: strawberry.Private[domain.Record]
    _as_of: strawberry.Private[datetime | None]
    # What the write answering with this record gave it: each property and how many
    # records of the write carry it (None: a read, which never warns).
    _written: strawberry.Private[Mapping[Property, int] | None] = None

    @strawberry.field(
        description="What the write that answers with this record noticed: a value it "
        "introduced near one already in use (SIMILAR_VALUE), so you can correct it. Empty "
        "on reads.",
        metadata=compiled(sql.nothing_listed),
    )
    async def warnings(self, info: Info) -> list[Warning]:
        if not self._written:
            return []
        async with info.context.read() as (db, lanes):
            found = await values.near(db, self._written, lanes)
        return [Warning.similar(p, v) for p, near in found.items() for v in near]

    @strawberry.field(
        description="When, by whom and why it was retired; null while it is not. Reads "
        "never show a retired record (record(id) says it is retired), so only "
        "retireRecord's answer and watch's LEFT of a retirement have one.",
        metadata=compiled(sql.Compiler.record_retired),
    )
    def retired(self) -> Retirement | None:
        gone = self._model.retirement
        if gone is None:
            return None
        return Retirement(at=gone.at, actor=gone.actor, reason=gone.reason)

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
        metadata=compiled(record_sql.versions),
    )
    async def versions(self, info: Info) -> list[Version]:
        history = await info.context.versions(self._model.id)
        return [Version.from_domain(v) for v in history if v.number <= self.version]

    @strawberry.field(
        description="The connections (e_connect) it is on.",
        metadata=compiled(record_sql.asserted_on(CONNECT)),
    )
    async def connections(self, info: Info) -> list[Connection]:
        return await on_record(info, self._model, self._as_of, CONNECT)  # type: ignore[return-value]

    @strawberry.field(
        description="The groups (e_group) it is a member of.",
        metadata=compiled(record_sql.asserted_on(GROUP)),
    )
    async def groups(self, info: Info) -> list[Group]:
        return await on_record(info, self._model, self._as_of, GROUP)  # type: ignore[return-value]

    @strawberry.field(
        description="The adjustment chains (e_adjustment) it is on.",
        metadata=compiled(record_sql.asserted_on(ADJUSTMENT)),
    )
    async def adjustments(self, info: Info) -> list[AdjustmentChain]:
        return await on_record(info, self._model, self._as_of, ADJUSTMENT)  # type: ignore[return-value]

    @strawberry.field(
        description="Corrections attached to it, oldest first; it stays as written.",
        metadata=compiled(record_sql.corrections),
    )
    async def corrections(self, info: Info) -> list[Correction]:
        return await corrections(info.context, self._model.id, self._as_of)

    @strawberry.field(
        description="Whether any correction is attached to it.",
        metadata=compiled(record_sql.corrected),
    )
    async def corrected(self, info: Info) -> bool:
        return bool(await self.corrections(info))

    @classmethod
    def written(cls, r: domain.Record, written: Mapping[Property, int] | None = None) -> Record:
        """A record as a write answers with it: `written` (default: every property it
        holds, on this one record) are the properties the write gave, checked for
        near values when `warnings` is asked for."""
        given = (
            written
            if written is not None
            else dict.fromkeys(domain.declared(r.state.properties), 1)
        )
        return dataclasses.replace(cls.from_domain(r), _written=given)

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
            expires_at=r.state.expires_at,
            properties=[str(p) for p in domain.declared(r.state.properties)],
            metadata=JSON(r.state.metadata),
            _model=r,
            _as_of=as_of,
        )


@strawberry.type(description="What addProperties or removeProperties did, value by value.")
class PropertyChange:
    record: Record = strawberry.field(
        description="The record after the change (unchanged when nothing changed)."
    )
    added: list[str] = strawberry.field(description="Values added, as label:value.")
    already_held: list[str] = strawberry.field(description="Values the record already carried.")
    rejected: list[str] = strawberry.field(description="Reserved (e_*) labels, skipped.")
    removed: list[str] = strawberry.field(description="Values removed, as label:value.")
    not_held: list[str] = strawberry.field(
        description="Labels or values asked to be removed that the record did not carry."
    )

    @classmethod
    def from_domain(cls, change: commands.PropertyChange) -> PropertyChange:
        return cls(
            record=Record.written(
                change.record, dict.fromkeys(map(parse_property, change.added), 1)
            ),
            added=change.added,
            already_held=change.already_held,
            rejected=change.rejected,
            removed=change.removed,
            not_held=change.not_held,
        )


@strawberry.type(description="One audit event; `before` and `after` are the record's versions.")
class AuditEvent:
    id: strawberry.ID = strawberry.field(
        description="The event id, ae_ + 32 hex (auditEvent takes it)."
    )
    cursor: str = strawberry.field(description="Its position in the feed; pass as `after`.")
    kind: str = strawberry.field(
        description="What happened: sr_ingested, sr_updated, property_added, "
        "property_removed, connected, disconnected, grouped, ungrouped, adjusted, unadjusted, "
        "corrected, policy_applied, or a newer kind."
    )
    record_id: strawberry.ID | None = strawberry.field(
        description="The record it is about; null for events about no record (a policy change)."
    )
    lane: str | None = strawberry.field(
        description="The lane of that record; null for a policy change."
    )
    actor: str = strawberry.field(description="The agent who made the change.")
    at: datetime = strawberry.field(description="When it was committed.")
    payload: JSON = strawberry.field(
        description="What changed (for example the property added); never names or counts "
        "a record you cannot read."
    )
    _model: strawberry.Private[audit.AuditEvent]

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
    def from_domain(cls, e: audit.AuditEvent) -> AuditEvent:
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


@strawberry.type(description="A record joining or leaving an asserted edge.")
class MembershipChange:
    record_id: strawberry.ID = strawberry.field(
        description="The record that joined or left.", metadata=compiled(sql.column("record_id"))
    )
    change: str = strawberry.field(
        description="joined or left", metadata=compiled(sql.column("change"))
    )
    at: datetime = strawberry.field(description="When.", metadata=compiled(sql.time("at")))
    actor: str = strawberry.field(
        description="The agent who made the change.", metadata=compiled(sql.column("actor"))
    )


@strawberry.interface(
    description="An edge someone declared (a relation, a membership or an evolution), "
    "as opposed to one imputed from a shared label:value."
)
class AssertedEdge:
    id: str = strawberry.field(
        description="The reserved edge property, e.g. e_connect:<hint>_<hex>.",
        metadata=compiled(sql.column("id")),
    )
    hint: str = strawberry.field(
        description="What the relation is, as given when it was made.",
        metadata=compiled(sql.column("hint")),
    )
    created_at: datetime = strawberry.field(
        description="When it was made.", metadata=compiled(sql.time("created_at"))
    )
    actor: str = strawberry.field(
        description="The agent who made it.", metadata=compiled(sql.column("actor"))
    )
    active: bool = strawberry.field(
        description="False once it no longer joins any record.",
        metadata=compiled(sql.column("active")),
    )
    ended_at: datetime | None = strawberry.field(
        description="When it stopped joining records.", metadata=compiled(sql.time("ended_at"))
    )
    ended_by: str | None = strawberry.field(
        description="The agent who ended it.", metadata=compiled(sql.column("ended_by"))
    )
    _model: strawberry.Private[asserted.Asserted]

    @strawberry.field(
        description="The readable records it joins (once ended: those it joined when it ended), "
        "in the order they joined.",
        metadata=compiled(record_sql.asserted_records),
    )
    async def records(self, info: Info) -> list[Record]:
        ids = self._model.record_ids
        found = await info.context.records(ids, self._model.as_of)
        return [Record.from_domain(found[i], self._model.as_of) for i in ids if i in found]

    @strawberry.field(
        description="Every readable record joining and leaving it, oldest first.",
        metadata=compiled(record_sql.history),
    )
    def history(self) -> list[MembershipChange]:
        changes = []
        for m in self._model.memberships:
            rid = strawberry.ID(m.record_id)
            changes.append(
                MembershipChange(record_id=rid, change="joined", at=m.joined_at, actor=m.joined_by)
            )
            if m.left_at is not None:
                changes.append(
                    MembershipChange(
                        record_id=rid, change="left", at=m.left_at, actor=m.left_by or ""
                    )
                )
        return sorted(changes, key=lambda c: c.at)


def _fields(model: asserted.Asserted) -> dict[str, object]:
    return {
        "id": str(model.prop),
        "hint": model.hint,
        "created_at": model.created_at,
        "actor": model.created_by,
        "active": model.active,
        "ended_at": model.ended_at,
        "ended_by": model.ended_by,
        "_model": model,
    }


@strawberry.type(description="A 1-to-1 relation between exactly two records (e_connect).")
class Connection(AssertedEdge):
    pass


@strawberry.type(description="A membership of two or more records (e_group).")
class Group(AssertedEdge):
    @strawberry.field(
        description="Its readable members now (or at asOf), by id.",
        metadata=compiled(gather_read.member_page, gather_read.bind_members),
    )
    async def members(
        self,
        info: Info,
        first: Annotated[int | None, strawberry.argument(description=d.FIRST)] = None,
        after: Annotated[str | None, strawberry.argument(description=d.AFTER)] = None,
    ) -> RecordPage:
        count = asks_for(info, "totalCount")
        async with info.context.read() as (conn, lanes):
            page = await gather_read.members(
                conn, self._model.prop, lanes, self._model.as_of, first, after, count
            )
        return await record_page(info, page, self._model.as_of)


@strawberry.type(
    description="An evolution (e_adjustment): a record and the records adjusting it, in time order."
)
class AdjustmentChain(AssertedEdge):
    pass


AssertedType = type[Connection] | type[Group] | type[AdjustmentChain]
_TYPES: dict[str, AssertedType] = {CONNECT: Connection, GROUP: Group, ADJUSTMENT: AdjustmentChain}


async def load(
    info: Info, props: list[Property], as_of: datetime | None = None
) -> list[Connection | Group | AdjustmentChain]:
    """The asserted edges named, in order; ones with no readable member are left out."""
    async with info.context.read() as (conn, lanes):
        found = await asserted.asserted(conn, props, lanes, as_of)
    return [_TYPES[p.label](**_fields(found[p])) for p in props if p in found]  # type: ignore[arg-type]


async def load_one(info: Info, prop: Property) -> Connection | Group | AdjustmentChain:
    """The edge a mutation just wrote or removed."""
    found = await load(info, [prop])
    if not found:
        raise NotFoundError(_TYPES[prop.label].__name__.lower(), str(prop))
    return found[0]


async def on_record(
    info: Info, record: domain.Record, as_of: datetime | None, label: str
) -> list[Connection | Group | AdjustmentChain]:
    props = [p for p in record.state.properties if p.label == label]
    return await load(info, props, as_of)
