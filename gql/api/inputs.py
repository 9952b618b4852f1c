"""GraphQL input types and their conversion to store commands."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import strawberry
from strawberry.schema.name_converter import NameConverter
from strawberry.types.arguments import InputContext

from gql.api import descriptions as d
from policies.guard import NO_EXPIRY, Expiry
from store.kinds.record import commands, embedding


@strawberry.input(description="A new record.")
class IngestInput:
    content: str = strawberry.field(description=d.CONTENT)
    properties: list[str] | None = strawberry.field(
        default=None, description="Its edge properties. " + d.PROPERTY_RULES
    )
    source_type: str | None = strawberry.field(
        default=None,
        description="Its source type, which fixes its authority and the labels it may carry: "
        "default conversational. An open lane takes the builtins conversational and "
        "documentary; a closed lane only its own types (see profile).",
    )
    lane: str | None = strawberry.field(
        default=None,
        description="The lane to write it in (default 'default'); you need write access.",
    )
    idempotency_key: str | None = strawberry.field(
        default=None,
        description="A retry with the same key (per agent) returns the first record instead "
        "of writing another; up to 256 characters.",
    )
    adjusts: list[strawberry.ID] | None = strawberry.field(
        default=None,
        description="Records this one adjusts: it joins their adjustment chains, and one new "
        "chain (e_adjustment:adj_<hex>) joins it to those on none.",
    )
    embedding: list[float] | None = strawberry.field(default=None, description=d.EMBEDDING)
    expires_at: datetime | None = strawberry.field(default=None, description=d.EXPIRES_AT)
    expire_now: bool | None = strawberry.field(default=None, description=d.EXPIRE_NOW)

    def to_command(self) -> commands.NewRecord:
        return commands.NewRecord(
            content=self.content,
            properties=tuple(self.properties or ()),
            source_type=self.source_type,
            lane=self.lane,
            idempotency_key=self.idempotency_key,
            adjusts=tuple(self.adjusts or ()),
            embedding=None if self.embedding is None else embedding.pack(self.embedding),
            expiry=expiry(self.expires_at, self.expire_now),
        )


def expiry(expires_at: datetime | None, expire_now: bool | None) -> Expiry:
    """What a write's `expiresAt` and `expireNow` ask."""
    if expires_at is None and not expire_now:
        return NO_EXPIRY
    return Expiry(expires_at, bool(expire_now))


def ingest_command(inputs: Iterable[IngestInput]) -> commands.Ingest:
    """The one command `ingest` and `ingestMany` run, whichever path answers them."""
    return commands.Ingest(tuple(i.to_command() for i in inputs))


def ingest_input(value: Mapping[str, Any], names: NameConverter) -> IngestInput:
    """An IngestInput straight from the value graphql-core has already coerced: every
    field is a string, a list (of strings, or the embedding's floats), the expiry's
    DateTime (parsed by its scalar) or a boolean, so there is nothing left to convert
    (strawberry's generic conversion walks each field's type for every value:
    bench/README.md, "Figures behind choices in the code").
    """
    kwargs: dict[str, Any] = {}
    for python_name, name in _field_names(names):
        given = value.get(name, _ABSENT)
        if given is not _ABSENT:
            # A copy: graphql-core hands every request the same default list.
            kwargs[python_name] = list(given) if isinstance(given, list) else given
    return IngestInput(**kwargs)


def _ingest_input(cls: type[IngestInput], value: Mapping[str, Any], context: InputContext) -> Any:
    return ingest_input(value, context.config.name_converter)


_ABSENT = object()


@functools.cache
def _field_names(names: NameConverter) -> tuple[tuple[str, str], ...]:
    """IngestInput's fields: (Python name, name in the schema)."""
    fields = IngestInput.__strawberry_definition__.fields  # type: ignore[attr-defined]
    return tuple((f.python_name, names.from_field(f)) for f in fields)


# strawberry's hook for input types that build their own value (StrawberryObjectDefinition).
IngestInput.__strawberry_definition__.from_input = _ingest_input  # type: ignore[attr-defined]
