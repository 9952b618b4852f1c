"""Generated operations over the whole schema: no 5xx, no unmasked failure, ever.

A short run in the suite; `scripts/chaos` runs a long one (EDGELOOM_FUZZ_EXAMPLES).
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

import httpx
from graphql import StringValueNode, print_ast
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_graphql import from_schema

from tests.support import REPO, Gateway

EXAMPLES = int(os.environ.get("EDGELOOM_FUZZ_EXAMPLES", "100"))
CODES = {"BAD_USER_INPUT", "UNAUTHENTICATED", "FORBIDDEN", "NOT_FOUND", "CONFLICT", "AMBIGUOUS_ID"}
# What must never reach a client: stack traces, driver or SQL text.
LEAKS = re.compile(r"Traceback|asyncpg|sqlalchemy|psycopg|\bSELECT\b|\bINSERT\b|File \"", re.I)
SCALARS = {
    "DateTime": st.sampled_from(["2026-01-01T00:00:00+00:00", "2026-11-30T12:00:00Z"]).map(
        lambda v: StringValueNode(value=v)
    ),
    "JSON": st.just(StringValueNode(value="{}")),
}


def check(response: httpx.Response, document: str) -> None:
    assert response.status_code < 500, response.text
    body: dict[str, Any] = response.json()
    # A refusal may echo what was sent (a lane named SELECT): only what the document did
    # not hold is a leak.
    sent = document.lower()
    leaked = [m.group(0) for m in LEAKS.finditer(response.text) if m.group(0).lower() not in sent]
    assert not leaked, response.text
    for error in body.get("errors") or []:
        code = (error.get("extensions") or {}).get("code")
        assert code in CODES, error  # INTERNAL_SERVER_ERROR means an unmasked fault was hit


def fuzz(url: str, sdl: str, client: httpx.Client) -> int:
    calls = 0
    documents = from_schema(sdl, custom_scalars=SCALARS, print_ast=print_ast)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=EXAMPLES <= 200,
        suppress_health_check=list(HealthCheck),
    )
    @given(document=documents)
    def one(document: str) -> None:
        nonlocal calls
        calls += 1
        check(client.post(url, json={"query": document}), document)

    one()
    return calls


async def test_generated_operations_are_answered_or_refused_never_failed(gateway: Gateway) -> None:
    sdl = (REPO / "schema.graphql").read_text(encoding="utf-8")
    # The gateway serves on this event loop; the generated calls come from a thread.
    with httpx.Client(timeout=30) as client:
        calls = await asyncio.to_thread(fuzz, gateway.graphql_url, sdl, client)
    assert calls >= min(EXAMPLES, 50)
