"""The resolver path of a registered read (`store.reads.registry`): the field's GraphQL
values handed to the read's `find` in one call, which reads its arguments from them as the
compiled path reads them, on the operation's snapshot."""

from __future__ import annotations

from typing import Any

from graphql.execution.values import VariableValues, get_argument_values

from gql.api.types import Info, asks_for
from store.reads import registry


def given(info: Info) -> dict[str, Any]:
    """The field's argument values (coerced by graphql-core, by their GraphQL names, as the
    compiled path's binder is given them). A resolver is handed the variables' coerced
    values alone, which is all a read's arguments (leaves and lists of them) are coerced
    from."""
    raw = info._raw_info
    field = raw.parent_type.fields[raw.field_name]
    values: Any = raw.variable_values
    variables = values if isinstance(values, VariableValues) else VariableValues({}, values)
    return get_argument_values(field, raw.field_nodes[0], variables)


async def find(info: Info, field: str, **request: Any) -> Any:
    """What the read answering `field` finds for the caller, from the field's values
    (`request`: what it takes from the request rather than from GraphQL, by name)."""
    values = {**given(info), **request}
    async with info.context.read() as (db, lanes):
        return await registry.read(field).find(
            db, values, lanes, lambda *path: asks_for(info, *path)
        )
