"""Variables of the plainest kinds, coerced without graphql-core's general machinery.

graphql-core coerces every variable through a walk that costs more than the rest
of a compiled read's Python. For the kinds agents send most (ID, String, Int,
Boolean, a list of String), a value that is exactly of its kind coerces to itself;
anything else (a float for an Int, an int for an ID, a default value, a custom
scalar, a missing non-null variable) returns None, and graphql-core decides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from graphql import (
    GraphQLError,
    GraphQLSchema,
    ListTypeNode,
    NamedTypeNode,
    NonNullTypeNode,
    TypeNode,
    VariableDefinitionNode,
)
from graphql.execution.get_variable_signature import get_variable_signature
from graphql.execution.values import VariableValues, VariableValueSource

_NO = object()
_INT_RANGE = range(-(2**31), 2**31)


def _id_or_string(value: Any) -> Any:
    return value if type(value) is str else _NO


def _int(value: Any) -> Any:
    return value if type(value) is int and value in _INT_RANGE else _NO


def _boolean(value: Any) -> Any:
    return value if type(value) is bool else _NO


def _strings(value: Any) -> Any:
    if type(value) is list and all(type(item) is str for item in value):
        return list(value)
    return _NO


_SCALARS: dict[str, Callable[[Any], Any]] = {
    "ID": _id_or_string,
    "String": _id_or_string,
    "Int": _int,
    "Boolean": _boolean,
}

Coercer = Callable[[Mapping[str, Any]], VariableValues | None]


def _check(kind: TypeNode) -> Callable[[Any], Any] | None:
    if isinstance(kind, NamedTypeNode):
        return _SCALARS.get(kind.name.value)
    # [String!]: a list of strings, none of them null.
    if (
        isinstance(kind, ListTypeNode)
        and isinstance(kind.type, NonNullTypeNode)
        and isinstance(kind.type.type, NamedTypeNode)
        and kind.type.type.name.value == "String"
    ):
        return _strings
    return None


def plain_coercer(
    schema: GraphQLSchema, definitions: Sequence[VariableDefinitionNode]
) -> Coercer | None:
    """A coercer for these variables when each is of a plain kind, else None."""
    plan = []
    for definition in definitions:
        signature = get_variable_signature(schema, definition)
        if isinstance(signature, GraphQLError):
            return None
        kind, required = definition.type, False
        if isinstance(kind, NonNullTypeNode):
            kind, required = kind.type, True
        check = _check(kind)
        if check is None or definition.default_value is not None:
            return None
        plan.append((definition.variable.name.value, signature, required, check))

    def coerce(inputs: Mapping[str, Any]) -> VariableValues | None:
        # The same values and sources graphql-core's coerce_variable_values gives.
        sources: dict[str, VariableValueSource] = {}
        out: dict[str, Any] = {}
        for name, signature, required, check in plan:
            if name not in inputs:
                if required:
                    return None
                sources[name] = VariableValueSource(signature)
                continue  # as graphql-core: the argument's default applies
            value = inputs[name]
            sources[name] = VariableValueSource(signature, value)
            if value is None:
                if required:
                    return None
                out[name] = None
                continue
            coerced = check(value)
            if coerced is _NO:
                return None
            out[name] = coerced
        return VariableValues(sources, out)

    return coerce
