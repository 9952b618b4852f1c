"""The Limits table of docs/security.md states the limits the code enforces."""

from __future__ import annotations

from pathlib import Path

from gql.api.cost import DEFAULT_MAX_COST
from gql.api.limits import (
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_FIELDS,
    MAX_LIST_ITEMS,
    MAX_VARIABLE_VALUES,
    MAX_VECTOR_ITEMS,
    MAX_VECTOR_NUMBERS,
)
from gql.api.schema import MAX_ALIASES, MAX_DEPTH, MAX_TOKENS, MAX_VALIDATION_WORK
from gql.server.settings import DEFAULT_REQUEST_TIMEOUT, Settings
from gql.server.waiting import MAX_WAITING
from policies.model import MAX_EMBEDDING_DIMENSIONS
from policies.properties import MAX_LABEL_LENGTH, MAX_VALUE_LENGTH
from policies.strict_yaml import MAX_ALIAS_NODES
from policies.strict_yaml import MAX_DEPTH as MAX_POLICY_DEPTH
from store.errors import TooManyWordsError
from store.kinds.record.embedding import MAX_NORM, MIN_NORM
from store.kinds.record.queries import DEFAULT_MAX_RESPONSE_BYTES
from store.limits import MAX_BATCH, MAX_CONTENT_CHARS, MAX_IDEMPOTENCY_KEY_LENGTH, MAX_PROPERTIES
from store.reads.pages import DEFAULT_PAGE, MAX_PAGE


def test_the_limits_table_matches_the_code(repo: Path) -> None:
    page = (repo / "docs" / "security.md").read_text(encoding="utf-8")
    table = page.split("\n## Limits\n", 1)[1].split("\n## ", 1)[0]
    assert MAX_LIST_ITEMS == MAX_BATCH
    for row in (
        f"| edge-property value | {MAX_VALUE_LENGTH} characters,",
        f"| edge-property label | {MAX_LABEL_LENGTH} characters,",
        f"| edge properties per record | {MAX_PROPERTIES} |",
        f"| record content | {MAX_CONTENT_CHARS:,} characters |",
        f"| words of one record's content | {TooManyWordsError.LIMIT:,} bytes in the text index",
        f"| `idempotencyKey` | {MAX_IDEMPOTENCY_KEY_LENGTH} characters ",
        f"may add at most {MAX_ALIAS_NODES:,} nodes; nesting at most {MAX_POLICY_DEPTH} levels |",
        f"| request body | {DEFAULT_MAX_BODY // 2**20} MiB |",
        f"| WebSocket message | {DEFAULT_MAX_BODY // 2**20} MiB (the body limit) |",
        f"| WebSocket connections per gateway process | {Settings.max_ws_connections:,}, ",
        f"acknowledged | {Settings.max_ws_unauthenticated:,} per process, "
        f"{Settings.max_ws_unauthenticated_per_address} per client address |",
        f"| time to send `connection_init` | {Settings.ws_init_timeout:g} seconds |",
        f"| `ingestMany` batch, and any list in variables | {MAX_BATCH} items; a vector (a list "
        f"of numbers only) {MAX_VECTOR_ITEMS} numbers,",
        f"| values in a request's variables | {MAX_VARIABLE_VALUES:,}, a vector counting as one |",
        f"| numbers in a request's vectors | {MAX_VECTOR_NUMBERS:,} (",
        f"| query depth / aliases / tokens | {MAX_DEPTH} / {MAX_ALIASES} / {MAX_TOKENS:,} |",
        f"| fields selected in a document, its fragments included | {DEFAULT_MAX_FIELDS:,}, ",
        f"compared in pairs) | {MAX_VALIDATION_WORK:,} steps |",
        f"| query cost | {DEFAULT_MAX_COST:,} objects |",
        f"| response size | {DEFAULT_MAX_RESPONSE_BYTES // 2**20} MiB |",
        f"| page size (`first`) | {MAX_PAGE} (default {DEFAULT_PAGE}) |",
        f"at most {MAX_EMBEDDING_DIMENSIONS:,} numbers), every number finite, a length "
        f"(Euclidean norm) between {MIN_NORM:g} and {MAX_NORM:.0e} |".replace("e+", "e"),
        f"| request time (HTTP) | {DEFAULT_REQUEST_TIMEOUT:g} seconds, for every operation",
        f"(PostgreSQL's `statement_timeout`) | {Settings(database_url='').statement_timeout:g} "
        "seconds:",
        f"from the read that completed its headers | {Settings.body_timeout:g} seconds ",
        f"| connections waiting for the rest of a request's body | {MAX_WAITING // 2} per process",
    ):
        assert row in table, row
