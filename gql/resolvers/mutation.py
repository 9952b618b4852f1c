"""Mutation resolvers: each turns its input into one command for the ledger."""

from __future__ import annotations

import strawberry

from gql.inputs import IngestInput, ingest_command
from gql.policy_types import PolicyVersion
from gql.resolvers.edges import EdgeMutation
from gql.types import (
    AdjustmentChain,
    Connection,
    Correction,
    Group,
    Info,
    PropertyChange,
    Record,
    load_one,
)
from store.kinds.correction.commands import Correct
from store.kinds.policy.commands import ApplyPolicy
from store.kinds.record import asserted_commands, commands


@strawberry.type
class Mutation(EdgeMutation):
    @strawberry.mutation(description="Write one record.")
    async def ingest(self, info: Info, input: IngestInput) -> Record:
        [record] = await info.context.execute(ingest_command([input]))
        return Record.from_domain(record)

    @strawberry.mutation(description="Write many records in one transaction: all or nothing.")
    async def ingest_many(self, info: Info, inputs: list[IngestInput]) -> list[Record]:
        return [Record.from_domain(r) for r in await info.context.execute(ingest_command(inputs))]

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

    @strawberry.mutation(
        description="Connect exactly two records: the engine mints e_connect:<hint>_<32 hex> "
        "and writes it on both, as a new version of each."
    )
    async def connect(
        self, info: Info, a: strawberry.ID, b: strawberry.ID, hint: str
    ) -> Connection:
        prop = await info.context.execute(asserted_commands.Connect(a, b, hint))
        return await load_one(info, prop)  # type: ignore[return-value]

    @strawberry.mutation(description="Remove a connection from both its records.")
    async def disconnect(self, info: Info, id: str) -> Connection:
        prop = await info.context.execute(asserted_commands.Disconnect(id))
        return await load_one(info, prop)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Group two or more records: the engine mints e_group:<hint>_<32 hex> "
        "and writes it on each, as a new version of each."
    )
    async def group(self, info: Info, record_ids: list[strawberry.ID], hint: str) -> Group:
        command = asserted_commands.Group(tuple(record_ids), hint)
        return await load_one(info, await info.context.execute(command))  # type: ignore[return-value]

    @strawberry.mutation(
        description="Remove the named members, or dissolve the group when none are named; "
        "a group left with fewer than two members is dissolved."
    )
    async def ungroup(
        self, info: Info, id: str, record_ids: list[strawberry.ID] | None = None
    ) -> Group:
        command = asserted_commands.Ungroup(id, None if record_ids is None else tuple(record_ids))
        return await load_one(info, await info.context.execute(command))  # type: ignore[return-value]

    @strawberry.mutation(
        description="Take a record off an adjustment chain; a chain left with one record ends."
    )
    async def unadjust(
        self, info: Info, record_id: strawberry.ID, adjustment: str
    ) -> AdjustmentChain:
        command = asserted_commands.Unadjust(record_id, adjustment)
        return await load_one(info, await info.context.execute(command))  # type: ignore[return-value]

    @strawberry.mutation(
        description="Attach a correction to a record; the record and its versions stay as written."
    )
    async def correct(
        self, info: Info, record_id: strawberry.ID, content: str, reason: str | None = None
    ) -> Correction:
        made = await info.context.execute(Correct(record_id, content, reason))
        return Correction.from_domain(made)

    @strawberry.mutation(description="Apply a new policy version (agents with apply_policy only).")
    async def apply_policy(self, info: Info, yaml: str) -> PolicyVersion:
        ctx = info.context
        command = ApplyPolicy(yaml, "applyPolicy", ctx.agent_name(), ctx.services.policies)
        return PolicyVersion.from_domain(await ctx.execute(command))
