"""Content within the content limit whose words pass PostgreSQL's limit on one record's
words (a tsvector of 1 MB) is refused by name on every way a record is written, never
answered as an internal error."""

from __future__ import annotations

import itertools
import string
from collections.abc import Iterator

import pytest

from store.limits import MAX_CONTENT_CHARS
from tests.conftest import DEV, GatewayFactory
from tests.gql._api import INGEST, INGEST_MANY, UPDATE, ingest
from tests.gql._mcp import over_http, refused
from tests.support import Gateway


def distinct_words() -> Iterator[str]:
    """Words of five letters, each different."""
    for letters in itertools.product(string.ascii_lowercase, repeat=4):
        yield "q" + "".join(letters)


# 700,000 characters, each word distinct: over a megabyte of lexemes and their positions.
MANY_WORDS = " ".join(itertools.islice(distinct_words(), 120_000))[:700_000]


def refusal_of(body: dict[str, object]) -> dict[str, object]:
    errors = body.get("errors")
    assert isinstance(errors, list) and len(errors) == 1, body
    error: dict[str, object] = errors[0]
    return error


def assert_named(error: dict[str, object]) -> None:
    extensions = error["extensions"]
    assert isinstance(extensions, dict)
    assert extensions["code"] == "BAD_USER_INPUT", error
    message = str(error["message"])
    assert "words" in message and "1,048,575 bytes" in message, message


def test_the_content_is_within_the_content_limit() -> None:
    assert len(MANY_WORDS) <= MAX_CONTENT_CHARS


@pytest.fixture(scope="module")
async def both(start_gateway: GatewayFactory) -> dict[bool, Gateway]:
    """The same memory served with the compiled path (True) and without it (False)."""
    compiled = await start_gateway(anonymous_agent=DEV)
    plain = await start_gateway(
        anonymous_agent=DEV, database_url=compiled.database_url, compiled_path=False
    )
    return {True: compiled, False: plain}


@pytest.mark.parametrize("compiled", [True, False])
async def test_too_many_words_are_refused_by_name_on_each_write(
    both: dict[bool, Gateway], compiled: bool
) -> None:
    served = both[compiled]
    body = await served.post(INGEST, {"input": {"content": MANY_WORDS}})
    assert_named(refusal_of(body))
    # The whole batch is refused, naming the input; nothing of it is written.
    body = await served.post(
        INGEST_MANY, {"inputs": [{"content": "fine"}, {"content": MANY_WORDS}]}
    )
    assert_named(refusal_of(body))
    assert body["data"] is None
    record = await ingest(served, "short")
    body = await served.post(UPDATE, {"id": record["id"], "content": MANY_WORDS})
    assert_named(refusal_of(body))


async def test_too_many_words_are_refused_by_name_over_mcp(both: dict[bool, Gateway]) -> None:
    async with over_http(both[True]) as session:
        error = await refused(session, "e_ingest", content=MANY_WORDS)
    assert error["code"] == "BAD_USER_INPUT", error
    assert "1,048,575 bytes" in str(error["error"]), error
