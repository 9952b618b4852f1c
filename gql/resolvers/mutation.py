"""Mutation resolvers: each turns its input into one command for the ledger."""

from __future__ import annotations

import strawberry

from gql.inputs import IngestInput
from gql.types import Info, PolicyVersion, PropertyChange, Record
from store import commands
from store.policy_commands import ApplyPolicy


@strawberry.type
class Mutation:
    @strawberry.mutation(description="Write one record.")
    async def ingest(self, info: Info, input: IngestInput) -> Record:
        [record] = await info.context.execute(commands.Ingest((input.to_command(),)))
        return Record.from_domain(record)

    @strawberry.mutation(description="Write many records in one transaction: all or nothing.")
    async def ingest_many(self, info: Info, inputs: list[IngestInput]) -> list[Record]:
        command = commands.Ingest(tuple(i.to_command() for i in inputs))
        return [Record.from_domain(r) for r in await info.context.execute(command)]

    @strawberry.mutation(
        description="Replace content and/or the values of the labels named; other labels stay."
    )
    async def update(
        self,
        info: Info,
        id: strawberry.ID,
        content: str | None = None,
        properties: list[str] | None = None,
        expected_version: int | None = None,
    ) -> Record:
        command = commands.Update(
            record_id=id,
            content=content,
            properties=None if properties is None else tuple(properties),
            expected_version=expected_version,
        )
        return Record.from_domain(await info.context.execute(command))

    @strawberry.mutation(description="Add edge properties; values already held are reported.")
    async def add_properties(
        self, info: Info, id: strawberry.ID, properties: list[str]
    ) -> PropertyChange:
        command = commands.AddProperties(record_id=id, properties=tuple(properties))
        return PropertyChange.from_domain(await info.context.execute(command))

    @strawberry.mutation(description="Remove whole labels and/or single label:value properties.")
    async def remove_properties(
        self,
        info: Info,
        id: strawberry.ID,
        labels: list[str] | None = None,
        properties: list[str] | None = None,
    ) -> PropertyChange:
        command = commands.RemoveProperties(
            record_id=id, labels=tuple(labels or ()), properties=tuple(properties or ())
        )
        return PropertyChange.from_domain(await info.context.execute(command))

    @strawberry.mutation(description="Apply a new policy version (agents with apply_policy only).")
    async def apply_policy(self, info: Info, yaml: str) -> PolicyVersion:
        ctx = info.context
        command = ApplyPolicy(yaml, "applyPolicy", ctx.agent_name(), ctx.services.policies)
        return PolicyVersion.from_domain(await ctx.execute(command))
