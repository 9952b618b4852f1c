"""`values` over GraphQL: the compiled path and the resolvers list a label's values alike,
page by page, whatever characters the values hold. (What `values` lists is tested at the
store: tests/store/test_values.py.)"""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import GatewayFactory
from tests.gql._api import ingest, unique
from tests.gql._differential import compiled_path
from tests.support import Gateway

VALUES = """
query($label: String!, $prefix: String, $similarTo: String, $first: Int, $after: String) {
  values(label: $label, prefix: $prefix, similarTo: $similarTo, first: $first,
         after: $after) {
    items { label value property memberCount __typename }
    pageInfo { hasNextPage endCursor }
  }
}
"""
# Values whose cursors need JSON escapes: quotes, backslashes, accents, another script,
# a character past the BMP.
WRITTEN = ["Acme", "ACME", "Acmé", 'say "hi"', "back\\slash", "日本", "emoji 😀", "Acne", "b"]


async def _both(compiled: Gateway, plain: Gateway, variables: dict[str, Any]) -> Any:
    """The page, the same from both paths; the compiled path must have answered."""
    path = compiled_path(compiled)
    before = path.answered
    got = await compiled.data(VALUES, variables)
    assert path.answered == before + 1, variables
    expected = await plain.data(VALUES, variables)
    assert json.dumps(got) == json.dumps(expected), (variables, got, expected)
    return got["values"]


async def test_both_paths_list_the_same_values_page_by_page(
    start_gateway: GatewayFactory,
) -> None:
    compiled = await start_gateway(anonymous_agent="dev")
    plain = await start_gateway(
        anonymous_agent="dev", database_url=compiled.database_url, compiled_path=False
    )
    label = unique("org")
    for n, value in enumerate(WRITTEN):
        for _ in range(1 + n % 3):
            await ingest(compiled, f"record of {value}", [f"{label}:{value}"])
    seen: list[str] = []
    for asked in ({}, {"prefix": "Ac"}, {"similarTo": "acme"}):
        for first in (1, 2, 50):
            variables: dict[str, Any] = {"label": label, "first": first, **asked}
            while True:
                page = await _both(compiled, plain, variables)
                seen += [item["value"] for item in page["items"]]
                if not page["pageInfo"]["hasNextPage"]:
                    break
                variables = {**variables, "after": page["pageInfo"]["endCursor"]}
    assert set(seen) == set(WRITTEN)
    # The engine's labels are listed by neither path (the compiled one leaves it to the other).
    path = compiled_path(compiled)
    before = path.answered
    hidden = {"label": "e_group", "first": 5}
    assert await compiled.data(VALUES, hidden) == await plain.data(VALUES, hidden)
    assert path.answered == before
