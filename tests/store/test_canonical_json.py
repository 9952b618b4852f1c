"""The ledger's canonical JSON is the reference text of docs/ledger.md, byte for byte."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from store.ledger.hashing import canonical_json

# Every code point but the surrogates, which UTF-8 cannot carry.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


def reference(body: Any) -> bytes:
    """The example of docs/ledger.md, the specification's own words in Python."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(TEXT, VALUES, max_size=6))
def test_generated_bodies_are_written_as_the_reference_writes_them(body: dict[str, Any]) -> None:
    assert canonical_json(body) == reference(body)


def test_every_code_point_is_written_as_the_reference_writes_it() -> None:
    for start in range(0, 0x110000, 0x800):
        chars = "".join(chr(c) for c in range(start, start + 0x800) if not 0xD800 <= c <= 0xDFFF)
        body = {"k" + chars[:7]: chars, "state": {"content": chars, "n": start}}
        assert canonical_json(body) == reference(body), hex(start)


def test_beyond_orjson_the_reference_decides() -> None:
    huge = {"n": 2**70}
    assert canonical_json(huge) == reference(huge)
