"""The compiled path reads a field's arguments exactly as graphql-core reads them."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from graphql import FieldNode, GraphQLError, OperationDefinitionNode, parse
from graphql.execution.values import get_argument_values, get_variable_values

from gql.api.compiled.plan import argument_reader
from gql.api.schema import schema

DOCUMENTS = [
    "query($id: ID!) { record(id: $id) { id } }",
    "query($id: ID) { record(id: $id) { id } }",
    'query { record(id: "sr_1") { id } }',
    "query($id: ID!, $at: DateTime) { record(id: $id, asOf: $at) { id } }",
    "query($n: Int) { records(first: $n) { totalCount } }",
    "query($n: Int = 3) { records(first: $n) { totalCount } }",
    'query { records(first: 5, lane: "default") { totalCount } }',
    "query($m: [String!]!, $f: Int, $l: [String!]) "
    "{ gather(match: $m, mode: TIMELINE, first: $f, lanes: $l) { totalCount } }",
    'query($c: String!) { gather(match: ["org:Acme", $c]) { totalCount } }',
    'query { gather(match: ["org:Acme"], lanes: null) { totalCount } }',
    'query($after: String) { edgeProperty(property: "org:Acme") '
    "{ members(first: 2, after: $after) { totalCount } } }",
]
VALUES: dict[str, list[Any]] = {
    "id": ["sr_1", None],
    "at": ["2026-01-01T00:00:00Z", None],
    "n": [2, None],
    "m": [["org:Acme", "topic:x"], []],
    "f": [1, None],
    "l": [["default"], None],
    "c": ["topic:x"],
    "after": ["abc", None],
}


def fields(node: Any) -> list[FieldNode]:
    found = []
    for selection in node.selection_set.selections if node.selection_set else ():
        if isinstance(selection, FieldNode):
            if selection.arguments:
                found.append(selection)
            found.extend(fields(selection))
    return found


def outcome(read: Any, *args: Any) -> Any:
    try:
        return read(*args)
    except GraphQLError:
        return "refused"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_arguments_read_as_graphql_core_reads_them(document: str) -> None:
    [operation] = parse(document).definitions
    assert isinstance(operation, OperationDefinitionNode)
    names = [d.variable.name.value for d in operation.variable_definitions or ()]
    sites = []
    for node in fields(operation):
        parent = schema._schema.query_type
        assert parent is not None
        field_def = parent.fields.get(node.name.value)
        if field_def is None:  # members, on EdgeProperty
            edge = schema._schema.get_type("EdgeProperty")
            field_def = edge.fields[node.name.value]  # type: ignore[union-attr]
        sites.append((field_def, node, argument_reader(field_def, node)))
    compared = 0
    for combination in itertools.product(*(VALUES[n] + ["<missing>"] for n in names)):
        inputs = {n: v for n, v in zip(names, combination, strict=True) if v != "<missing>"}
        variables = get_variable_values(
            schema._schema, operation.variable_definitions or (), inputs
        )
        if isinstance(variables, list):
            continue  # refused before any argument is read
        for field_def, node, read in sites:
            general = outcome(get_argument_values, field_def, node, variables)
            assert outcome(read, variables) == general, (document, inputs)
            compared += 1
    assert compared > 0
