"""What search refuses before it reaches SQL: its text and its cursor."""

from __future__ import annotations

import pytest

from store.errors import InvalidInputError
from store.kinds.record.search.arguments import check_text, search_cursor
from store.reads.pages import encode_cursor


def test_a_nul_in_the_text_is_refused_saying_so() -> None:
    with pytest.raises(InvalidInputError, match="NUL character"):
        check_text("renewal\x00risk")


@pytest.mark.parametrize(
    "key",
    [
        ["inf", "2026-12-04T10:00:00+00:00", "sr_1"],  # a score no search gives
        ["0.5", "2026-12-04T10:00:00", "sr_1"],  # an instant with no zone
        ["high", "2026-12-04T10:00:00+00:00", "sr_1"],  # not a number
    ],
)
def test_a_cursor_search_did_not_give_is_refused(key: list[str]) -> None:
    with pytest.raises(InvalidInputError, match="is not one this list gave out"):
        search_cursor(encode_cursor(key))


def test_a_cursor_search_gave_is_read_back() -> None:
    score, since, ident = search_cursor(
        encode_cursor(["0.25", "2026-12-04T10:00:00+00:00", "sr_1"])
    ) or (None, None, None)
    assert (score, since.isoformat() if since else None, ident) == (
        0.25,
        "2026-12-04T10:00:00+00:00",
        "sr_1",
    )
