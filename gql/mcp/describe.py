"""The tools' descriptions, read from the GraphQL schema's own: one text for both
surfaces, so what GraphiQL's docs pane says and what an agent's tool list says never
drift apart."""

from __future__ import annotations

from graphql import GraphQLInputObjectType, GraphQLInterfaceType, GraphQLObjectType

from gql.api.schema import schema

_TYPES = schema._schema.type_map


def field(type_name: str, name: str) -> str:
    """The description of a field of an object or input type (camelCase names)."""
    found = _TYPES[type_name]
    assert isinstance(found, GraphQLObjectType | GraphQLInterfaceType | GraphQLInputObjectType)
    return _said(found.fields[name].description, f"{type_name}.{name}")


def argument(type_name: str, name: str, arg: str) -> str:
    """The description of one argument of a field."""
    found = _TYPES[type_name]
    assert isinstance(found, GraphQLObjectType | GraphQLInterfaceType)
    return _said(found.fields[name].args[arg].description, f"{type_name}.{name}({arg})")


def type_(type_name: str) -> str:
    return _said(_TYPES[type_name].description, type_name)


def _said(text: str | None, where: str) -> str:
    # tests/gql/test_descriptions.py fails first; this keeps a tool from saying nothing.
    if not text:
        raise LookupError(f"{where} has no description in the schema")
    return text
