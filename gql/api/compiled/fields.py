"""What the compiled path answers, read from the schema: a field is compiled when its
strawberry definition carries a `CompiledField` in its metadata (`compiled(...)`).

So one place, the field's definition, says that it exists, its type, the SQL that
answers it (a builder of `store.reads.compiled_sql`) and, for a field with arguments, how
they are checked and bound for that SQL. A query field answered by a registered read
(`store.reads.registry`) says only which (`served`): the read binds and builds it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphql import GraphQLField, GraphQLObjectType, GraphQLSchema, get_named_type
from strawberry.schema.schema_converter import GraphQLCoreConverter

from store.reads import registry
from store.reads.compiled_sql import Build, Compiler, Sel
from store.reads.snapshot import Reader

Values = dict[str, Any]
# A field's arguments, bound: checks them as its resolver does (raising what it raises),
# puts their values for SQL in `values` under the site's prefix, and says their shape (a
# type of the read's own).
Binder = Callable[[str, Mapping[str, Any], Sequence[str], Values], Hashable]
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
    # The registered read answering it (`served`), whose `before` is its `read`.
    served: str | None = None

    def before(self) -> Read | None:
        """What the field reads before its statement, if anything."""
        return self.read if self.served is None else registry.read(self.served).before


def compiled(
    build: Build, bind: Binder | None = None, read: Read | None = None
) -> dict[str, CompiledField]:
    """Metadata for `strawberry.field`: the field is answered by `build`'s SQL (after
    `read`, when it needs one)."""
    return {_KEY: CompiledField(build, bind, read)}


def served(field: str) -> dict[str, CompiledField]:
    """Metadata for the `strawberry.field` of a query field answered by the registered
    read `field`: its arguments read and bound, and its SQL built, by the read."""

    def build(compiler: Compiler, sel: Sel, row: object) -> str:
        return registry.read(field).sql(compiler, sel, compiler.shapes[sel.site or 0])

    def bind(
        prefix: str, args: Mapping[str, Any], lanes: Sequence[str], values: Values
    ) -> Hashable:
        read = registry.read(field)
        return read.bind(values, prefix, read.arguments(args), lanes)

    return {_KEY: CompiledField(build, bind, served=field)}


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
