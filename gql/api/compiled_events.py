"""A feed event's result for a plain selection, made without executing the operation.

A live subscription's events are rendered once per read for every subscriber running
the same operation under the same rights (`gql.api.resolvers.subscription._render`). When the
operation's only root field is `auditEvents` and it selects nothing but fields read
straight off the event (scalars with no resolver, no arguments and no directives, through
aliases and fragments as GraphQL merges them), each event's result is the event's
values, serialized by the schema's own scalars, under the response keys in the order
GraphQL's execution would give them. Anything else (`before`, `after`, a directive) is
executed by strawberry, as it always was; `tests/gql/test_feed_compiled_events.py`
holds the two to the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from graphql import (
    GraphQLError,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    OperationType,
    get_operation_ast,
    parse,
)
from strawberry.schema.base import BaseSchema
from strawberry.schema.schema_converter import GraphQLCoreConverter

from gql.api.compiled.selection import collect, plain_operation
from gql.api.types import AuditEvent
from store.ledger.audit import AuditEvent as Event
from store.reads.compiled_sql import NotCompilable

ROOT_FIELD = "auditEvents"
_TYPENAME = "__typename"


@dataclass(frozen=True)
class _Plain:
    """One response key: the attribute of `gql.api.types.AuditEvent` it reads, and how it is
    serialized (None: `__typename`)."""

    key: str
    attribute: str
    serialize: Callable[[Any], Any] | None
    nullable: bool


@dataclass(frozen=True)
class PlainSelection:
    """How an operation's result for one event is made, when it can be (`plain_selection`)."""

    root_key: str
    fields: tuple[_Plain, ...]

    def data(self, event: Event) -> dict[str, Any]:
        """The operation's `data` for `event`, as executing it gives it; ValueError where
        executing it would give an error instead (a null for a non-null field)."""
        source = AuditEvent.from_domain(event)
        values: dict[str, Any] = {}
        for plain in self.fields:
            if plain.serialize is None:
                values[plain.key] = "AuditEvent"
                continue
            value = getattr(source, plain.attribute)
            if value is None:
                if not plain.nullable:
                    raise ValueError(f"null for the non-null field '{plain.key}'")
                values[plain.key] = None
            else:
                values[plain.key] = plain.serialize(value)
        return {self.root_key: values}


def plain_selection(
    schema: BaseSchema, query: str, operation_name: str | None
) -> PlainSelection | None:
    """The operation's plain selection of `auditEvents`, or None when it must be executed.
    The document has passed validation when the operation was subscribed."""
    return _plain_selection(schema._schema, query, operation_name)  # type: ignore[attr-defined]


@lru_cache(maxsize=512)
def _plain_selection(
    graphql_schema: GraphQLSchema, query: str, operation_name: str | None
) -> PlainSelection | None:
    try:
        document = parse(query)
        operation = get_operation_ast(document, operation_name)
        if operation is None:
            return None
        fragments = plain_operation(document, operation, OperationType.SUBSCRIPTION)
        subscription = graphql_schema.subscription_type
        if subscription is None:
            return None
        roots = collect([operation.selection_set], fragments, subscription.name)
        if len(roots) != 1 or roots[0].name != ROOT_FIELD:
            return None
        root = roots[0]
        event_type = graphql_schema.type_map["AuditEvent"]
        assert isinstance(event_type, GraphQLObjectType)
        selections = [n.selection_set for n in root.nodes if n.selection_set is not None]
        fields = tuple(
            _plain(event_type, node.key, node.name, node.nodes)
            for node in collect(
                selections, fragments, event_type.name, [i.name for i in event_type.interfaces]
            )
        )
    except (GraphQLError, NotCompilable, KeyError):
        return None
    return PlainSelection(root.key, fields)


def _plain(event_type: GraphQLObjectType, key: str, name: str, nodes: list[Any]) -> _Plain:
    if name == _TYPENAME:
        return _Plain(key, name, None, False)
    field = event_type.fields[name]
    definition: Any = (field.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    resolver = getattr(definition, "base_resolver", True)
    if resolver is not None or getattr(definition, "extensions", True) or field.args:
        raise NotCompilable(f"'{name}' is resolved")
    if any(node.arguments for node in nodes):
        raise NotCompilable("arguments")
    nullable = not isinstance(field.type, GraphQLNonNull)
    named = field.type if nullable else field.type.of_type
    if not isinstance(named, GraphQLScalarType):
        raise NotCompilable(f"'{name}' is not a scalar")
    return _Plain(key, definition.python_name, named.serialize, nullable)
