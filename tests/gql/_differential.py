"""For the compiled path's differential tests: the documents the test suite holds, and
variable values to send with them."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphql import DocumentNode, GraphQLError, OperationDefinitionNode, parse
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gql.server.compiled_endpoint import CompiledPath
from tests.support import Gateway, without_request_ids

TESTS = Path(__file__).resolve().parent
# The agents of the multi-lane example policy. A caller without a token is refused
# before either path runs (the policy has no anonymous agent): `refused_before_compiling`.
AGENTS = ("curator", "sales", "planner")


@dataclass
class Pair:
    """Two gateways on one database, one with the compiled path and one without; tokens
    by agent, and pools of variable values by variable name."""

    compiled: Gateway
    plain: Gateway
    tokens: dict[str, str]
    pools: dict[str, list[Any]]


def compiled_path(gateway: Gateway) -> CompiledPath:
    path = gateway.app.view.compiled
    assert path is not None, "the compiled path is off"
    return path


def suite_operations() -> list[tuple[str, list[OperationDefinitionNode]]]:
    """Every document the GraphQL tests hold, as constants or string literals, with its
    operations."""
    texts: set[str] = set()
    for path in sorted(TESTS.glob("*.py")):
        module = importlib.import_module(f"tests.gql.{path.stem}")
        texts.update(v for v in vars(module).values() if isinstance(v, str))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.add(node.value)
    found = []
    for text in sorted(texts):
        try:
            document: DocumentNode = parse(text)
        except GraphQLError:
            continue
        operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        if operations:
            found.append((text, operations))
    return found


def variants(query: str, pools: Mapping[str, list[Any]]) -> Iterator[dict[str, Any]]:
    """Variable values for the document's variables, cycling through each pool."""
    definitions = [
        d
        for op in parse(query).definitions
        for d in getattr(op, "variable_definitions", None) or ()
    ]
    names = [d.variable.name.value for d in definitions]
    width = max([len(pools.get(n, [None])) for n in names] or [1])
    for i in range(width):
        yield {n: pools.get(n, [None])[i % len(pools.get(n, [None]))] for n in names}


def drawn(documents: st.SearchStrategy[str], count: int) -> list[str]:
    """`count` documents drawn from a hypothesis-graphql strategy, without shrinking."""
    found: list[str] = []

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(documents)
    def collect(query: str) -> None:
        found.append(query)

    collect()
    return found


async def refused_before_compiling(
    pair: Pair, documents: Sequence[str], pools: Mapping[str, list[Any]]
) -> int:
    """Sends each call without a token to both gateways: each must be answered 401, with
    the same body, and none by the compiled path. Returns how many calls were sent."""
    path = compiled_path(pair.compiled)
    before, sent = path.answered, 0
    for query in documents:
        for variables in variants(query, pools):
            answers = [
                await gateway.client.post(
                    gateway.graphql_url, json={"query": query, "variables": variables}
                )
                for gateway in (pair.plain, pair.compiled)
            ]
            assert [a.status_code for a in answers] == [401, 401], (query, variables)
            bodies = [without_request_ids(a.json()) for a in answers]
            assert bodies[0] == bodies[1], (query, variables)
            sent += 1
    assert path.answered == before, "a call without a token reached the compiled path"
    return sent


async def answered_by_path(
    gateway: Gateway,
    documents: Sequence[str],
    pools: Mapping[str, list[Any]],
    send: Callable[[str, dict[str, Any]], Awaitable[None]],
) -> int:
    """Sends each document with each variant of its variables; returns how many of the
    calls the gateway's compiled path answered (rather than declined)."""
    path = compiled_path(gateway)
    before = path.answered
    for query in documents:
        for variables in variants(query, pools):
            await send(query, variables)
    return path.answered - before
