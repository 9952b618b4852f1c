"""The plain variable coercer gives exactly what graphql-core gives, or steps aside."""

from __future__ import annotations

import itertools
from typing import Any

from graphql import OperationDefinitionNode, build_schema, parse
from graphql.execution.values import get_variable_values

from gql.api.compiled.variables import plain_coercer
from gql.api.schema import schema

DOCUMENT = """
query($id: ID!, $maybe: ID, $s: String, $n: Int, $b: Boolean, $match: [String!]!,
      $lanes: [String!]) { __typename }
"""
VALUES: dict[str, list[Any]] = {
    "id": ["sr_1", 7, None, 1.5, True, [], "x" * 40],
    "maybe": ["a", None, 3],
    "s": ["text", 1, None, False],
    "n": [0, 2**31 - 1, 2**31, -(2**31), 3.0, True, "4", None],
    "b": [True, False, 0, None, "true"],
    "match": [["a:b"], [], ["a", None], "a:b", None, [1]],
    "lanes": [None, ["x", "y"], ("x",), "x"],
}


def described(sources: dict[str, Any]) -> dict[str, Any]:
    """Sources compared by content (signatures are new objects on each coercion)."""
    return {
        name: (s.signature.name, str(s.signature.type), s.signature.default, s.value)
        for name, s in sources.items()
    }


def coerced_alike(document: str, values: dict[str, list[Any]]) -> int:
    """Every combination of the values (each variable also missing) through the plain
    coercer; each it accepts must equal graphql-core's. Returns how many it accepted."""
    [operation] = parse(document).definitions
    assert isinstance(operation, OperationDefinitionNode)
    definitions = operation.variable_definitions
    coerce = plain_coercer(schema._schema, definitions)
    assert coerce is not None
    names = list(values)
    checked = 0
    for combination in itertools.product(*(values[n] + ["<missing>"] for n in names)):
        inputs = {n: v for n, v in zip(names, combination, strict=True) if v != "<missing>"}
        plain = coerce(inputs)
        if plain is None:
            continue
        general = get_variable_values(schema._schema, definitions, inputs)
        assert not isinstance(general, list), (inputs, general)
        assert plain.coerced == general.coerced, inputs
        assert described(plain.sources) == described(general.sources), inputs
        checked += 1
    return checked


def test_each_value_coerces_as_graphql_core_or_not_at_all() -> None:
    assert coerced_alike(DOCUMENT, VALUES) > 100


def test_defaults_are_left_to_graphql_core() -> None:
    [operation] = parse('query($a: String = "x") { __typename }').definitions
    assert isinstance(operation, OperationDefinitionNode)
    assert plain_coercer(schema._schema, operation.variable_definitions) is None


def test_the_schemas_own_scalars_coerce_by_their_parser_as_graphql_core_does() -> None:
    # A DateTime (an ingest's expiresAt, a read's asOf): an instant, null or missing
    # coerce; what its parser refuses is left to graphql-core to word.
    times = {"t": ["2026-12-07T12:00:00+00:00", "2026-12-07T12:00:00Z", "not a time", 5, None]}
    assert coerced_alike("query($t: DateTime) { __typename }", times) == 4


INPUTS = "mutation($one: IngestInput!, $many: [IngestInput!]) { __typename }"
INPUT_VALUES: dict[str, list[Any]] = {
    "one": [
        {"content": "a"},
        {"content": "b", "properties": ["x:y"], "lane": None, "adjusts": ["sr_1"]},
        {"content": "c", "sourceType": "meeting", "idempotencyKey": "k", "properties": []},
        {"content": "a", "extra": 1},
        {"content": 5},
        {"lane": "x"},
        {"content": None},
        {"content": "a", "adjusts": [5]},
        {"content": "a", "properties": "x:y"},
        {"content": "a", "properties": ["x:y", None]},
        {"content": "e", "embedding": [0.5, 1, -2.25]},
        {"content": "e", "embedding": [True]},
        {"content": "e", "embedding": [float("nan")]},
        {"content": "e", "embedding": [2**60]},
        {"content": "e", "embedding": 0.5},
        "not an object",
        None,
    ],
    "many": [
        [],
        [{"content": "a"}, {"content": "b", "lane": "l"}],
        [{"content": 1}],
        {"content": "a"},
    ],
}


def test_input_objects_coerce_as_graphql_core_or_not_at_all() -> None:
    # Each accepted single input (an embedding's numbers among them), with each accepted
    # list or none.
    assert coerced_alike(INPUTS, INPUT_VALUES) == 4 * 3


def test_an_input_object_that_holds_itself_is_left_to_graphql_core() -> None:
    recursive = build_schema(
        "input F { name: String and: [F!] } input G { a: String } type Query { q(f: F, g: G): Int }"
    )
    for document, plain in (
        ("query($f: F) { q(f: $f) }", False),
        ("query($g: G) { q(g: $g) }", True),
    ):
        [operation] = parse(document).definitions
        assert isinstance(operation, OperationDefinitionNode)
        found = plain_coercer(recursive, operation.variable_definitions)
        assert (found is not None) is plain, document
