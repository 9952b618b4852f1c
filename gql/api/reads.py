"""The resolver path of a registered read (`store.reads.registry`): its arguments read from
the field's GraphQL values by the read itself, as the compiled path reads them, and what
it finds on the operation's snapshot."""

from __future__ import annotations

import dataclasses
from typing import Any

from graphql.execution.values import VariableValues, get_argument_values

from gql.api.types import Info, asks_for
from store.reads import registry


def arguments(info: Info, read: registry.Read) -> Any:
    """The read's arguments from the field being resolved (coerced by graphql-core, by
    their GraphQL names, as the compiled path's binder is given them). A resolver is
    handed the variables' coerced values alone, which is all a read's arguments (leaves
    and lists of them) are coerced from."""
    raw = info._raw_info
    field = raw.parent_type.fields[raw.field_name]
    given: Any = raw.variable_values
    variables = given if isinstance(given, VariableValues) else VariableValues({}, given)
    return read.arguments(get_argument_values(field, raw.field_nodes[0], variables))


async def find(info: Info, field: str, **request: Any) -> Any:
    """What the read answering `field` finds for the caller, its arguments read from the
    field (`request`: what they take from the request rather than from GraphQL, such as
    the vector scope of a search, by name)."""
    read = registry.read(field)
    args = arguments(info, read)
    if request:
        args = dataclasses.replace(args, **request)
    async with info.context.read() as (db, lanes):
        return await read.find(db, args, lanes, lambda *path: asks_for(info, *path))
