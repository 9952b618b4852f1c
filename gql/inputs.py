"""GraphQL input types and their conversion to store commands."""

from __future__ import annotations

import strawberry

from store import commands


@strawberry.input(description="A new record.")
class IngestInput:
    content: str
    properties: list[str] | None = strawberry.field(
        default=None, description="Edge properties as label:value strings, e.g. org:Acme."
    )
    source_type: str | None = strawberry.field(
        default=None, description="Defaults to conversational; a closed lane names its own."
    )
    lane: str | None = strawberry.field(default=None, description="Defaults to 'default'.")
    idempotency_key: str | None = strawberry.field(
        default=None,
        description="A retry with the same key (per agent) returns the first record.",
    )
    adjusts: list[strawberry.ID] | None = strawberry.field(
        default=None,
        description="Records this one adjusts: it joins their adjustment chains, and one new "
        "chain (e_adjustment:adj_<hex>) joins it to those on none.",
    )

    def to_command(self) -> commands.NewRecord:
        return commands.NewRecord(
            content=self.content,
            properties=tuple(self.properties or ()),
            source_type=self.source_type,
            lane=self.lane,
            idempotency_key=self.idempotency_key,
            adjusts=tuple(self.adjusts or ()),
        )
