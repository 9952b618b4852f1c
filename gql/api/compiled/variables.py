"""Variables of the plainest kinds, coerced without graphql-core's general machinery.

graphql-core coerces every variable through a walk that costs more than the rest
of a compiled read's Python, and about a tenth of a 500-record `ingestMany`. For the
kinds agents send most (ID, String, Int, Float, Boolean, a list of String, ID or Float
(an embedding), and input
objects whose fields are of those kinds, alone or in a list), a value that is
exactly of its kind coerces to itself; anything else (a float for an Int, an int for
an ID, a single value for a list, an unknown or missing field, a default value, a
custom scalar, a missing non-null variable) returns None, and graphql-core decides.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from graphql import (
    GraphQLError,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLScalarType,
    GraphQLSchema,
    NonNullTypeNode,
    Undefined,
    VariableDefinitionNode,
)
from graphql.execution.get_variable_signature import get_variable_signature
from graphql.execution.values import VariableValues, VariableValueSource, get_variable_values

_NO = object()
_INT_RANGE = range(-(2**31), 2**31)


def _id_or_string(value: Any) -> Any:
    return value if type(value) is str else _NO


def _int(value: Any) -> Any:
    return value if type(value) is int and value in _INT_RANGE else _NO


# Beyond this an int may not be a float exactly (or at all): graphql-core decides.
_FLOAT_EXACT = 2**53


def _float(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else _NO
    return float(value) if kind is int and -_FLOAT_EXACT <= value <= _FLOAT_EXACT else _NO


def _floats(value: Any) -> Any:
    if type(value) is not list:
        return _NO
    out = [_float(item) for item in value]
    return _NO if any(item is _NO for item in out) else out


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
    "Float": _float,
    "Boolean": _boolean,
}


def _parsed(parse: Callable[[Any], Any], value: Any) -> Any:
    """A value of the schema's own scalars (DateTime, say) as graphql-core coerces it:
    by the scalar's parser, anything it refuses left to graphql-core to word."""
    try:
        parsed = parse(value)
    except Exception:  # graphql-core turns any of them into its error
        return _NO
    return _NO if parsed is Undefined else parsed


Coercer = Callable[[Mapping[str, Any]], VariableValues | None]


def _check(
    kind: GraphQLInputType, within: frozenset[str] = frozenset()
) -> Callable[[Any], Any] | None:
    """A check for non-null values of `kind` (its own nullability stripped), or None
    when values of `kind` are not plain. `within`: the input objects around it (one that
    holds itself is not plain)."""
    if isinstance(kind, GraphQLNonNull):
        kind = kind.of_type
    if isinstance(kind, GraphQLScalarType):
        return _SCALARS.get(kind.name) or functools.partial(_parsed, kind.parse_value)
    if isinstance(kind, GraphQLInputObjectType):
        return _input_object(kind, within)
    if not (isinstance(kind, GraphQLList) and isinstance(kind.of_type, GraphQLNonNull)):
        return None
    item = kind.of_type.of_type
    # [String!] and [ID!]: a list of strings, none of them null.
    if isinstance(item, GraphQLScalarType) and item.name in ("String", "ID"):
        return _strings
    # [Float!]: an embedding, hundreds of numbers a record.
    if isinstance(item, GraphQLScalarType) and item.name == "Float":
        return _floats
    if isinstance(item, GraphQLInputObjectType):
        each = _input_object(item, within)
        if each is not None:
            return functools.partial(_items, each)
    return None


def _items(check: Callable[[Any], Any], value: Any) -> Any:
    if type(value) is not list:
        return _NO
    out = [check(item) for item in value]
    return _NO if any(item is _NO for item in out) else out


def _input_object(
    kind: GraphQLInputObjectType, within: frozenset[str]
) -> Callable[[Any], Any] | None:
    if getattr(kind, "is_one_of", False) or kind.name in within:
        return None
    plan: list[_Field] = []
    for name, field in kind.fields.items():
        # No default, or null: an absent field is left out, or is null, as graphql-core has it.
        if field.default_value not in (Undefined, None) or getattr(field, "default", None):
            return None
        check = _check(field.type, within | {kind.name})
        if check is None:
            return None
        required = isinstance(field.type, GraphQLNonNull)
        plan.append((name, required, field.default_value is None, check))
    names = frozenset(kind.fields)

    def coerce(value: Any) -> Any:
        if type(value) is not dict or not names.issuperset(value):
            return _NO
        out: dict[str, Any] = {}
        return out if _coerce_fields(plan, value, out) else _NO

    return coerce


# A field of an input object, or a variable: its name, whether it is required, whether
# it is null when absent, and its check.
_Field = tuple[str, bool, bool, Callable[[Any], Any]]


def _coerce_fields(plan: Sequence[_Field], given: Mapping[str, Any], out: dict[str, Any]) -> bool:
    """Each planned field of `given`, coerced into `out`; False when one is not plain."""
    for name, required, null_if_absent, check in plan:
        if name not in given:
            if required:
                return False
            if null_if_absent:
                out[name] = None
            continue
        value = given[name]
        if value is None:
            if required:
                return False
            out[name] = None
            continue
        coerced = check(value)
        if coerced is _NO:
            return False
        out[name] = coerced
    return True


def plain_coercer(
    schema: GraphQLSchema, definitions: Sequence[VariableDefinitionNode]
) -> Coercer | None:
    """A coercer for these variables when each is of a plain kind, else None."""
    plan: list[_Field] = []
    signatures = []
    for definition in definitions:
        signature = get_variable_signature(schema, definition)
        if isinstance(signature, GraphQLError):
            return None
        required = isinstance(definition.type, NonNullTypeNode)
        check = _check(signature.type)
        if check is None or definition.default_value is not None:
            return None
        name = definition.variable.name.value
        # Absent, it is left out: as graphql-core, the argument's default applies.
        plan.append((name, required, False, check))
        signatures.append((name, signature))

    def coerce(inputs: Mapping[str, Any]) -> VariableValues | None:
        # The same values and sources graphql-core's coerce_variable_values gives.
        out: dict[str, Any] = {}
        if not _coerce_fields(plan, inputs, out):
            return None
        sources = {
            name: VariableValueSource(signature, inputs[name])
            if name in inputs
            else VariableValueSource(signature)
            for name, signature in signatures
        }
        return VariableValues(sources, out)

    return coerce


def coercer(schema: GraphQLSchema, definitions: Sequence[VariableDefinitionNode]) -> Coercer:
    """An operation's variables coerced, the plain way when they allow and by graphql-core
    otherwise; None when they do not coerce (the ordinary path reports why)."""
    plain = plain_coercer(schema, definitions)

    def coerce(inputs: Mapping[str, Any]) -> VariableValues | None:
        if plain is not None:
            coerced = plain(inputs)
            if coerced is not None:
                return coerced
        general = get_variable_values(schema, definitions, dict(inputs))
        return None if isinstance(general, list) else general

    return coerce
