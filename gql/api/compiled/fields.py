"""What the compiled path answers, read from the schema: a field is compiled when its
strawberry definition carries a `CompiledField` in its metadata (`compiled(...)`).

So one place, the field's definition, says that it exists, its type, the SQL that
answers it (a builder of `store.reads.compiled_sql`) and, for a field with arguments, how
they are checked and bound for that SQL.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphql import GraphQLField, GraphQLObjectType, GraphQLSchema, get_named_type
from strawberry.schema.schema_converter import GraphQLCoreConverter

from store.reads.compiled_sql import Build
from store.reads.shape import Shape
from store.reads.snapshot import Reader

Values = dict[str, Any]
# A field's arguments, bound: checks them as its resolver does (raising what it raises),
# puts their values for SQL in `values` under the site's prefix, and says their shape.
Binder = Callable[[str, Mapping[str, Any], Sequence[str], Values], Shape]
# What a field reads before its statement, on the request's snapshot (a walk, hop by
# hop): it puts what it found in `values` under the site's prefix, or raises what its
# resolver raises.
Read = Callable[[Reader, str, Values], Awaitable[None]]

_KEY = "edgeloom.compiled"


@dataclass(frozen=True)
class CompiledField:
    """How the compiled path answers one field."""

    build: Build
    bind: Binder | None = None
    read: Read | None = None


def compiled(
    build: Build, bind: Binder | None = None, read: Read | None = None
) -> dict[str, CompiledField]:
    """Metadata for `strawberry.field`: the field is answered by `build`'s SQL (after
    `read`, when it needs one)."""
    return {_KEY: CompiledField(build, bind, read)}


def compiled_field(field: GraphQLField) -> CompiledField | None:
    """The field's compiled answer, if its definition declares one."""
    definition = (field.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    found = getattr(definition, "metadata", None) or {}
    value = found.get(_KEY)
    return value if isinstance(value, CompiledField) else None


def compiled_fields(schema: GraphQLSchema) -> dict[str, dict[str, GraphQLField]]:
    """Every compiled field by object type, the types reached from `Query` through them."""
    found: dict[str, dict[str, GraphQLField]] = {}
    pending = [schema.query_type]
    while pending:
        object_type = pending.pop()
        if object_type is None or object_type.name in found:
            continue
        fields = found[object_type.name] = {
            name: f for name, f in object_type.fields.items() if compiled_field(f) is not None
        }
        for f in fields.values():
            named = get_named_type(f.type)
            if isinstance(named, GraphQLObjectType):
                pending.append(named)
    return found
