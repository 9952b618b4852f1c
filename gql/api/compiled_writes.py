"""Writes answered without strawberry's execution: `ingest` and `ingestMany`.

A write's work is its command: the guard, one ledger transaction, its audit events;
around a single ingest, strawberry's execution (the operation's extensions, the
execution context, argument conversion, completing each field) costs more than that
work (bench/README.md). Covered: an operation whose one root field is `ingest` or
`ingestMany`, selecting only the plain fields of `Record` and of its `edgeProperties`
(fields read from the object alone: an attribute, or a method that needs no
arguments, no `info` and no await), fragments included, no directives.

The input is coerced to what the ordinary path gets (`variables.coercer`); variables
that do not coerce decline the request before anything runs, so strawberry words
that error.
From the command on, the answer is this path's own, built as GraphQL would build it:
each field's value is the attribute the ordinary path reads, serialized by the
schema's own scalars, and a refusal or failure becomes the error `ErrorCodes`
makes, at the field's path, with `data: null` (both fields are non-null).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from graphql import (
    DocumentNode,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    get_named_type,
    located_error,
)
from strawberry.schema.name_converter import NameConverter

from gql.api.compiled.plan import Arguments, Declined, argument_reader
from gql.api.compiled.selection import Node, children, collect, plain_operation
from gql.api.compiled.variables import Coercer, coercer
from gql.api.errors import to_graphql_error
from gql.api.inputs import ingest_command, ingest_input
from gql.api.types import EdgeProperty, Record
from store.kinds.record import commands
from store.kinds.record import model as domain
from store.reads.compiled_sql import NotCompilable

# Root fields covered: whether each answers a list, and the name of its input argument.
ROOTS = {"ingest": (False, "input"), "ingestMany": (True, "inputs")}
# Object types a covered write may select into (their fields as `_readers` allows).
COVERED: dict[str, type] = {"Record": Record, "EdgeProperty": EdgeProperty}


@dataclass(frozen=True)
class Output:
    """One response key of an object: how its value is read and completed."""

    key: str
    read: Callable[[Any], Any]
    complete: Callable[[Any], Any]


@dataclass
class Write:
    """A covered mutation, made once per document and operation name."""

    schema: GraphQLSchema
    document: DocumentNode
    operation: OperationDefinitionNode
    arguments: Arguments  # the root field's
    root: Node
    many: bool
    argument: str
    complete: Callable[[Any], Any]  # a record as the root field answers it
    names: NameConverter
    coerce: Coercer = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.coerce = coercer(self.schema, self.operation.variable_definitions or ())

    def inputs(self, variables: Mapping[str, Any] | None) -> list[Any]:
        """The coerced input values; raises Declined when the variables do not coerce."""
        coerced = self.coerce(variables or {})
        if coerced is None:
            raise Declined()
        try:
            value = self.arguments(coerced)[self.argument]
        except GraphQLError as exc:
            raise Declined() from exc
        return list(value) if self.many else [value]

    def command(self, inputs: list[Any]) -> commands.Ingest:
        """The command, converted as the resolver's arguments are (its refusals are the field's)."""
        return ingest_command(ingest_input(v, self.names) for v in inputs)

    def answer(self, written: Sequence[domain.Record]) -> bytes:
        """The response body for the records the command returned."""
        objects = [self.complete(Record.from_domain(r)) for r in written]
        return orjson.dumps({"data": {self.root.key: objects if self.many else objects[0]}})

    def failure(self, error: Exception) -> bytes:
        """The response body for a command that raised: the error at the field's path."""
        located = located_error(error, self.root.nodes, [self.root.key])
        return orjson.dumps({"data": None, "errors": [to_graphql_error(located).formatted]})


def compile_write(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation: OperationDefinitionNode,
    names: NameConverter,
) -> Write:
    """The covered write for this operation; raises NotCompilable for anything else."""
    fragments = plain_operation(document, operation, OperationType.MUTATION)
    roots = collect([operation.selection_set], fragments, "Mutation")
    if len(roots) != 1 or roots[0].name not in ROOTS:
        raise NotCompilable("not one ingest or ingestMany")
    [root] = roots
    many, argument = ROOTS[root.name]
    mutation = schema.mutation_type
    assert mutation is not None
    return Write(
        schema,
        document,
        operation,
        argument_reader(mutation.fields[root.name], root.nodes[0]),
        root,
        many,
        argument,
        _completer(schema, names, fragments, children(root), "Record"),
        names,
    )


def _completer(
    schema: GraphQLSchema,
    names: NameConverter,
    fragments: Mapping[str, FragmentDefinitionNode],
    selection_sets: list[SelectionSetNode],
    type_name: str,
) -> Callable[[Any], dict[str, Any]]:
    """How an object of a covered type is answered for these selection sets."""
    readers = _readers(COVERED[type_name], names)
    object_type = schema.get_type(type_name)
    assert isinstance(object_type, GraphQLObjectType)
    outputs = []
    for node in collect(selection_sets, fragments, type_name):
        if node.name == "__typename":
            outputs.append(Output(node.key, functools.partial(_named, type_name), _itself))
            continue
        read = readers.get(node.name)
        if read is None:
            raise NotCompilable(f"{type_name}.{node.name}")
        kind = object_type.fields[node.name].type
        named = get_named_type(kind)
        if isinstance(named, GraphQLObjectType):
            if named.name not in COVERED:
                raise NotCompilable(named.name)
            inner = _completer(schema, names, fragments, children(node), named.name)
        else:
            inner = named.serialize
        outputs.append(Output(node.key, read, _wrapped(kind, inner)))
    covered = tuple(outputs)

    def complete(value: Any) -> dict[str, Any]:
        return {o.key: o.complete(o.read(value)) for o in covered}

    return complete


def _readers(cls: type, names: NameConverter) -> dict[str, Callable[[Any], Any]]:
    """The fields of a type whose value comes from the object alone: an attribute, or a
    plain method (not async, no arguments, no `info`). Others are not covered."""
    readers: dict[str, Callable[[Any], Any]] = {}
    for f in cls.__strawberry_definition__.fields:  # type: ignore[attr-defined]
        if f.extensions or f.permission_classes or f.directives:
            continue
        resolver = f.base_resolver
        if resolver is None:
            readers[names.from_field(f)] = operator.attrgetter(f.python_name)
        elif not (resolver.is_async or resolver.arguments or resolver.info_parameter):
            readers[names.from_field(f)] = resolver.wrapped_func
    return readers


def _wrapped(kind: GraphQLOutputType, inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`inner` applied through the type's lists; null stays null."""
    if isinstance(kind, GraphQLNonNull):
        return _wrapped(kind.of_type, inner)
    if isinstance(kind, GraphQLList):
        item = _wrapped(kind.of_type, inner)
        return lambda value: None if value is None else [item(v) for v in value]
    return lambda value: None if value is None else inner(value)


def _named(name: str, _value: Any) -> str:
    return name


def _itself(value: Any) -> Any:
    return value
