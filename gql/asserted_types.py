"""GraphQL types of asserted edges (connections, groups, adjustment chains), corrections
and traversals, each built from a store dataclass."""

from __future__ import annotations

from datetime import datetime

import strawberry

from gql.compiled.fields import compiled
from gql.compiled.plan import bind_members
from gql.types import Info, Record, RecordPage, record_page
from policies.properties import Property
from store import asserted, traverse
from store import compiled_sql as sql
from store import records as domain
from store.corrections import corrections_of
from store.errors import NotFoundError
from store.ids import ADJUSTMENT, CONNECT, GROUP
from store.projection import CorrectionRow


@strawberry.type(description="A record joining or leaving an asserted edge.")
class MembershipChange:
    record_id: strawberry.ID = strawberry.field(metadata=compiled(sql.column("record_id")))
    change: str = strawberry.field(
        description="joined or left", metadata=compiled(sql.column("change"))
    )
    at: datetime = strawberry.field(metadata=compiled(sql.time("at")))
    actor: str = strawberry.field(metadata=compiled(sql.column("actor")))


@strawberry.interface(
    description="An edge someone declared (a relation, a membership or an evolution), "
    "as opposed to one imputed from a shared label:value."
)
class AssertedEdge:
    id: str = strawberry.field(
        description="The reserved edge property, e.g. e_connect:<hint>_<hex>.",
        metadata=compiled(sql.column("id")),
    )
    hint: str = strawberry.field(metadata=compiled(sql.column("hint")))
    created_at: datetime = strawberry.field(metadata=compiled(sql.time("created_at")))
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
    ended_by: str | None = strawberry.field(metadata=compiled(sql.column("ended_by")))
    _model: strawberry.Private[asserted.Asserted]

    @strawberry.field(
        description="The readable records it joins (once ended: those it joined when it ended), "
        "in the order they joined.",
        metadata=compiled(sql.Compiler.asserted_records),
    )
    async def records(self, info: Info) -> list[Record]:
        ids = self._model.record_ids
        found = await info.context.records(ids, self._model.as_of)
        return [Record.from_domain(found[i], self._model.as_of) for i in ids if i in found]

    @strawberry.field(
        description="Every readable record joining and leaving it, oldest first.",
        metadata=compiled(sql.Compiler.history),
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
        metadata=compiled(sql.Compiler.members, bind_members),
    )
    async def members(
        self, info: Info, first: int | None = None, after: str | None = None
    ) -> RecordPage:
        async with info.context.read() as (conn, lanes):
            page = await asserted.member_page(
                conn, self._model.prop, lanes, self._model.as_of, first, after
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


@strawberry.type(description="A correction attached to a record; the record is left as it was.")
class Correction:
    id: strawberry.ID = strawberry.field(metadata=compiled(sql.column("id")))
    record_id: strawberry.ID = strawberry.field(metadata=compiled(sql.column("record_id")))
    record_version: int = strawberry.field(
        description="The version it corrects.", metadata=compiled(sql.column("record_version"))
    )
    content: str = strawberry.field(metadata=compiled(sql.column("content")))
    reason: str | None = strawberry.field(metadata=compiled(sql.column("reason")))
    actor: str = strawberry.field(metadata=compiled(sql.column("actor")))
    at: datetime = strawberry.field(metadata=compiled(sql.time("at")))

    @classmethod
    def from_domain(cls, c: CorrectionRow) -> Correction:
        return cls(
            id=strawberry.ID(c.id),
            record_id=strawberry.ID(c.record_id),
            record_version=c.record_version,
            content=c.content,
            reason=c.reason,
            actor=c.actor,
            at=c.at,
        )


async def corrections(info: Info, record_id: str, as_of: datetime | None) -> list[Correction]:
    async with info.context.read() as (conn, lanes):
        found = await corrections_of(conn, [record_id], lanes, as_of)
    return [Correction.from_domain(c) for c in found.get(record_id, [])]


@strawberry.type(description="One record a traversal reached.")
class TraversalItem:
    record: Record
    hop: int = strawberry.field(description="How many edges away from the start it is.")
    via: str = strawberry.field(description="The edge property (label:value) it was reached by.")


@strawberry.type(description="A value shared by too many records to walk (a hub).")
class ClippedEdge:
    via: str
    hop: int
    member_count: int = strawberry.field(description="How many readable records carry it.")


@strawberry.type(description="The records reached from one record, breadth first.")
class Traversal:
    items: list[TraversalItem]
    not_shown: int = strawberry.field(
        description="Records reached but not listed: those past limit, plus the members of "
        "each clipped hub (see clipped)."
    )
    clipped: list[ClippedEdge]
    beyond_limit: int


async def traversal(info: Info, found: traverse.Traversal, as_of: datetime | None) -> Traversal:
    records = await info.context.records([s.record_id for s in found.steps], as_of)
    return Traversal(
        items=[
            TraversalItem(
                record=Record.from_domain(records[s.record_id], as_of), hop=s.hop, via=str(s.via)
            )
            for s in found.steps
            if s.record_id in records
        ],
        not_shown=found.not_shown,
        clipped=[
            ClippedEdge(via=str(c.via), hop=c.hop, member_count=c.member_count)
            for c in found.clipped
        ],
        beyond_limit=found.beyond_limit,
    )
