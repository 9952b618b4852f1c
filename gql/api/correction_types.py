"""The GraphQL type of a correction attached to a record, and the read of a record's."""

from __future__ import annotations

from datetime import datetime

import strawberry

from gql.api.compiled.fields import compiled
from gql.api.context import Context
from store.kinds.correction.projection import CorrectionRow
from store.kinds.correction.reads import corrections_of
from store.reads import compiled_sql as sql


@strawberry.type(description="A correction attached to a record; the record is left as it was.")
class Correction:
    id: strawberry.ID = strawberry.field(
        description="The correction id.", metadata=compiled(sql.column("id"))
    )
    record_id: strawberry.ID = strawberry.field(
        description="The record it corrects.", metadata=compiled(sql.column("record_id"))
    )
    record_version: int = strawberry.field(
        description="The version it corrects.", metadata=compiled(sql.column("record_version"))
    )
    content: str = strawberry.field(
        description="What is correct instead.", metadata=compiled(sql.column("content"))
    )
    reason: str | None = strawberry.field(
        description="Why, as given; null when none was.", metadata=compiled(sql.column("reason"))
    )
    actor: str = strawberry.field(
        description="The agent who attached it.", metadata=compiled(sql.column("actor"))
    )
    at: datetime = strawberry.field(
        description="When it was attached.", metadata=compiled(sql.time("at"))
    )

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


async def corrections(context: Context, record_id: str, as_of: datetime | None) -> list[Correction]:
    """The readable corrections of a record, oldest first (made by as_of, when given)."""
    async with context.read() as (conn, lanes):
        found = await corrections_of(conn, [record_id], lanes, as_of)
    return [Correction.from_domain(c) for c in found.get(record_id, [])]
