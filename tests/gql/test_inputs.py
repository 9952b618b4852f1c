"""IngestInput is built by its own hook; it must build what strawberry's conversion builds."""

from __future__ import annotations

from typing import Any

import pytest
from strawberry.types.arguments import convert_argument

from gql.api.inputs import IngestInput
from gql.api.schema import schema

FULL = {
    "content": "x",
    "properties": ["org:Acme"],
    "sourceType": "note",
    "lane": "default",
    "idempotencyKey": "k1",
    "adjusts": ["sr_1", "sr_2"],
}


@pytest.mark.parametrize(
    "value",
    [FULL, {"content": "only"}, {**FULL, "properties": None, "adjusts": []}],
    ids=["every field", "content only", "nulls and empty lists"],
)
def test_the_hook_builds_what_strawberry_would(value: dict[str, Any]) -> None:
    definition = IngestInput.__strawberry_definition__  # type: ignore[attr-defined]
    config = schema.config
    scalars = schema.schema_converter.scalar_registry
    built = convert_argument(value, IngestInput, scalars, config)
    hook, definition.from_input = definition.from_input, None
    try:
        generic = convert_argument(value, IngestInput, scalars, config)
    finally:
        definition.from_input = hook
    assert hook is not None
    assert built == generic
    assert built.to_command() == generic.to_command()
    # and the lists are the request's own, not graphql-core's shared defaults
    if value.get("properties") is not None:
        assert built.properties is not value["properties"]
