"""From a validated query to a bound statement: arguments checked as the resolvers check them.

An `Operation` is made once per document and operation name: its response keys as
`Sel` trees and its argument sites (fields that take arguments). Each request binds
the sites' arguments, from literals and coerced variables, with the same functions
the resolvers call; whatever they refuse (a bad id, a page size out of range, a
cursor from elsewhere) makes the request decline the compiled path, so the
ordinary path words the refusal. The statement is compiled once per shape of the
bound arguments (which optional ones are set, how many properties a gather has).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLError,
    GraphQLField,
    GraphQLObjectType,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
    VariableNode,
    get_named_type,
    is_non_null_type,
    is_required_argument,
)
from graphql.execution.values import VariableValues, coerce_argument, get_argument_values
from graphql.language import Visitor, visit

from gql.api.compiled.fields import Binder, Read, Values, compiled_field
from gql.api.compiled.selection import Node, children, collect, plain_operation
from gql.api.compiled.variables import Coercer, coercer
from policies.errors import PolicyError
from store.errors import StoreError
from store.kinds.record.reads.search import VECTOR_SCOPE
from store.kinds.record.search.arguments import VectorScope
from store.reads.compiled_sql import Compiler, NotCompilable, Sel, typename
from store.reads.snapshot import Reader
from store.reads.statements import Statement

# A field's arguments from the request's coerced variables; raises GraphQLError.
Arguments = Callable[[VariableValues], dict[str, Any]]


class _HasVariable(Visitor):
    found = False

    def enter_variable(self, *_: object) -> None:
        self.found = True


def argument_reader(field_def: GraphQLField, node: FieldNode) -> Arguments:
    """What graphql-core's `get_argument_values` gives for `node`, with the arguments
    that do not depend on variables coerced once here (by graphql-core itself): per
    request only the variables are looked up.

    An argument that nests a variable inside a literal (`match: ["a:b", $c]`), or one
    that does not coerce, leaves the whole field to graphql-core per request; so does
    any request whose variables it would refuse, so that it refuses them its way.
    """

    def per_request(variables: VariableValues) -> dict[str, Any]:
        return get_argument_values(field_def, node, variables)

    given = {argument.name.value: argument for argument in node.arguments or ()}
    fixed: dict[str, Any] = {}
    # key, variable, what an absent variable gives (None: an error), non-null
    by_variable: list[tuple[str, str, dict[str, Any] | None, bool]] = []
    try:
        for name, argument in field_def.args.items():
            given_node = given.get(name)
            if given_node is not None and isinstance(given_node.value, VariableNode):
                absent: dict[str, Any] | None = None
                if not is_required_argument(argument):
                    absent = {}
                    coerce_argument(absent, node, name, argument, None, None, None)
                key = argument.out_name or name
                non_null = is_non_null_type(argument.type)
                by_variable.append((key, given_node.value.name.value, absent, non_null))
                continue
            if given_node is not None:
                nested = _HasVariable()
                visit(given_node.value, nested)
                if nested.found:
                    return per_request
            coerce_argument(fixed, node, name, argument, given_node, None, None)
    except GraphQLError:
        return per_request

    def read(variables: VariableValues) -> dict[str, Any]:
        out = dict(fixed)
        values = variables.coerced
        for key, variable, absent, non_null in by_variable:
            if variable in values:
                value = values[variable]
                if value is None and non_null:
                    return per_request(variables)
                out[key] = value
            elif absent is None:
                return per_request(variables)
            else:
                out.update(absent)
        return out

    return read


class Declined(Exception):
    """This request is answered the ordinary way."""


@dataclass
class Site:
    """A field taking arguments: how to read and bind them for one request, and what it
    reads before the statement, if anything."""

    arguments: Arguments
    bind: Binder
    read: Read | None = None


@dataclass
class Bound:
    """One request's statement and values, and the reads to run before it (by site)."""

    statement: Statement
    values: Values
    reads: list[tuple[str, Read]]

    async def read(self, db: Reader) -> None:
        """Run the reads before the statement, on its snapshot; raises Declined."""
        for prefix, read in self.reads:
            try:
                await read(db, prefix, self.values)
            except (StoreError, PolicyError) as exc:
                raise Declined() from exc

    def args(self) -> list[Any]:
        return self.statement.args(self.values)


@dataclass
class Operation:
    """A query operation compiled to `Sel` trees, with its statements by argument shape."""

    schema: GraphQLSchema
    document: DocumentNode
    operation: OperationDefinitionNode
    roots: tuple[Sel, ...]
    sites: list[Site]
    statements: dict[tuple[Hashable, ...], Any] = field(default_factory=dict)
    coerce: Coercer = field(init=False)

    def __post_init__(self) -> None:
        self.coerce = coercer(self.schema, self.operation.variable_definitions or ())

    def bind(
        self,
        variables: Mapping[str, Any] | None,
        lanes: Sequence[str],
        max_bytes: int,
        vectors: VectorScope | None = None,
    ) -> Bound:
        """The statement and values for one request (a body of at most `max_bytes` of
        data; `vectors`: what a search by vector may use), with the reads to run first;
        raises Declined."""
        coerced = self.coerce(variables or {})
        if coerced is None:
            raise Declined()
        values: Values = {"lanes": list(lanes), "max_bytes": max_bytes}
        if vectors is not None:
            values[VECTOR_SCOPE] = vectors
        shapes: list[Hashable] = []
        reads: list[tuple[str, Read]] = []
        try:
            for number, site in enumerate(self.sites):
                prefix = f"s{number}_"
                shapes.append(site.bind(prefix, site.arguments(coerced), lanes, values))
                if site.read is not None:
                    reads.append((prefix, site.read))
        except (StoreError, PolicyError, GraphQLError, ValueError) as exc:
            raise Declined() from exc
        key = tuple(shapes)
        statement = self.statements.get(key)
        if statement is None:
            shapes_by_site = dict(enumerate(shapes))
            statement = Compiler(shapes_by_site).statement(self.roots)
            self.statements[key] = statement
        return Bound(statement, values, reads)


def compile_operation(
    schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode
) -> Operation:
    """The operation's trees and sites; raises NotCompilable for what is not covered."""
    fragments = plain_operation(document, operation, OperationType.QUERY)
    sites: list[Site] = []

    def tree(nodes: list[Node], object_type: GraphQLObjectType) -> tuple[Sel, ...]:
        sels = []
        for node in nodes:
            if node.name == "__typename":
                sels.append(Sel(node.key, node.name, build=typename(object_type.name)))
                continue
            field_def = object_type.fields.get(node.name)
            answer = None if field_def is None else compiled_field(field_def)
            if field_def is None or answer is None:
                raise NotCompilable(f"{object_type.name}.{node.name}")
            site = None
            if answer.bind is not None:
                site = len(sites)
                reader = argument_reader(field_def, node.nodes[0])
                sites.append(Site(reader, answer.bind, answer.before()))
            named = get_named_type(field_def.type)
            kids: tuple[Sel, ...] = ()
            if isinstance(named, GraphQLObjectType):
                interfaces = [i.name for i in named.interfaces]
                kids = tree(collect(children(node), fragments, named.name, interfaces), named)
            sels.append(Sel(node.key, node.name, site, kids, answer.build))
        return tuple(sels)

    query = schema.query_type
    assert query is not None
    roots = tree(collect([operation.selection_set], fragments, query.name), query)
    return Operation(schema, document, operation, roots, sites)
