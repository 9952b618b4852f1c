"""The GraphQL types a record is shown with that hold no record themselves: each
`Version` of it, its `Retirement`, and a `Warning` of what a write noticed."""

from __future__ import annotations

from datetime import datetime

import strawberry

from gql.api import descriptions as d
from gql.api.compiled.fields import compiled
from gql.api.scalars import JSON
from policies.properties import Property
from store.kinds.record import model as domain
from store.kinds.record.reads import values
from store.reads import compiled_sql as sql


@strawberry.type(description="One version of a record: its whole state after one change.")
class Version:
    number: int = strawberry.field(
        description="The version number, from 1.", metadata=compiled(sql.column("version"))
    )
    at: datetime = strawberry.field(
        description="When it was written.", metadata=compiled(sql.time("at"))
    )
    event: str = strawberry.field(
        description="The change that wrote it (sr_ingested, sr_updated, property_added, ...).",
        metadata=compiled(sql.column("event")),
    )
    actor: str = strawberry.field(
        description="The agent who wrote it.", metadata=compiled(sql.column("actor"))
    )
    content: str = strawberry.field(
        description="The content in this version.", metadata=compiled(sql.state("content"))
    )
    properties: list[str] = strawberry.field(
        description="The caller-written edge properties in this version, as label:value.",
        metadata=compiled(sql.Compiler.version_properties),
    )
    metadata: JSON = strawberry.field(
        description=d.METADATA_VERSION, metadata=compiled(sql.Compiler.version_metadata)
    )
    lane: str = strawberry.field(
        description="The lane in this version.", metadata=compiled(sql.state("lane"))
    )
    source_type: str = strawberry.field(
        description="The source type in this version.", metadata=compiled(sql.state("source_type"))
    )
    authority: str = strawberry.field(
        description="The authority in this version.", metadata=compiled(sql.state("authority"))
    )
    policy_version: int = strawberry.field(
        description="The policy version in force when it was written.",
        metadata=compiled(sql.column("policy_version")),
    )
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
            metadata=JSON(v.state.metadata),
            lane=v.state.lane,
            source_type=v.state.source_type,
            authority=v.state.authority,
            policy_version=v.policy_version,
            hash=v.hash,
        )


@strawberry.type(description="When, by whom and why a record was retired.")
class Retirement:
    at: datetime = strawberry.field(
        description="When it was retired (its tombstone's time).", metadata=compiled(sql.time("at"))
    )
    actor: str = strawberry.field(
        description="The agent that retired it.", metadata=compiled(sql.column("actor"))
    )
    reason: str | None = strawberry.field(
        description="Why, as given to retireRecord.", metadata=compiled(sql.column("reason"))
    )


@strawberry.type(description="Something a write did that you may want to correct.")
class Warning:
    # Compiled as columns of a row no read has: a read's `warnings` is always empty.
    code: str = strawberry.field(
        description="SIMILAR_VALUE: a new value near an existing one of the same label.",
        metadata=compiled(sql.column("code")),
    )
    message: str = strawberry.field(
        description="What was noticed, and what you may do.",
        metadata=compiled(sql.column("message")),
    )
    property: str | None = strawberry.field(
        description="The property written, label:value.",
        metadata=compiled(sql.column("property")),
    )
    similar_to: str | None = strawberry.field(
        description="The existing property it is near, label:value.",
        metadata=compiled(sql.column("similar_to")),
    )
    member_count: int | None = strawberry.field(
        description="How many records you can read carry similarTo.",
        metadata=compiled(sql.column("member_count")),
    )

    @classmethod
    def similar(cls, written: Property, near: values.ValueCount) -> Warning:
        return cls(
            code="SIMILAR_VALUE",
            message=f"'{written}' is a new value; '{near.property}' is near it and "
            f"{near.member_count} record(s) carry it: if you meant the same, write that one "
            "(update or removeProperties, then addProperties)",
            property=str(written),
            similar_to=near.property,
            member_count=near.member_count,
        )
