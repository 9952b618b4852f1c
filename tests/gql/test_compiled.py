"""The compiled read path answers exactly as strawberry does, and in one statement.

Two gateways on one database, one with the compiled path and one without, get the
same requests: every read document of the test suite with variables drawn from the
data (ids, prefixes, cursors, times, bad values too), plus documents generated from
the schema restricted to the compiled fields, under every agent of a multi-lane
policy and without a token. The parsed responses must be equal, errors included.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from graphql import OperationType, StringValueNode
from hypothesis import strategies as st
from hypothesis_graphql import queries

from tests.conftest import GatewayFactory
from tests.gql._api import GATHER, RECORD, RECORD_FIELDS
from tests.gql._differential import (
    AGENTS,
    Pair,
    answered_by_path,
    drawn,
    suite_operations,
)
from tests.gql._policy_support import ADD, UPDATE, ingest, mint

TESTS = Path(__file__).resolve().parent
COMPILED_ROOTS = ("record", "records", "gather", "edgeProperty")


def in_order(body: dict[str, Any]) -> dict[str, Any]:
    """The body with its errors sorted by path: strawberry lists concurrent fields'
    errors in the order they happened to fail."""
    if "errors" in body:
        body = {**body, "errors": sorted(body["errors"], key=lambda e: str(e.get("path")))}
    return body


def read_documents() -> list[str]:
    """Every query document the GraphQL tests hold."""
    return [
        text
        for text, operations in suite_operations()
        if all(d.operation is OperationType.QUERY for d in operations)
    ]


class World(Pair):
    async def both(self, query: str, variables: dict[str, Any], agent: str | None) -> None:
        token = self.tokens[agent] if agent else None
        expected = await self.plain.post(query, variables, token)
        got = await self.compiled.post(query, variables, token)
        if got.get("data") is None and expected.get("data") is None and "errors" in expected:
            # A null root field stops execution at its error, so which errors of the
            # other root fields made it in is a matter of timing: compare the ones
            # both answers hold.
            mine = {str(e.get("path")): e for e in got.get("errors", [])}
            theirs = {str(e.get("path")): e for e in expected["errors"]}
            both = mine.keys() & theirs.keys()
            assert both, (query, variables, agent, got, expected)
            assert all(mine[k] == theirs[k] for k in both), (query, variables, agent)
            return
        assert in_order(got) == in_order(expected), (query, variables, agent)


@pytest.fixture(scope="module")
async def world(start_gateway: GatewayFactory, crm_yaml: str) -> World:
    plain = await start_gateway(policy_yaml=crm_yaml, compiled_path=False)
    tokens = await mint(plain, "curator", "sales", "planner")
    times = [datetime(2000, 1, 1, tzinfo=UTC).isoformat()]
    ids = []
    for n in range(6):
        fields = (
            {"lane": "crm", "sourceType": "meeting", "properties": ["org:Acme", "person:Sam"]}
            if n % 2
            else {"lane": "notes", "properties": ["org:Acme", f"topic:t{n % 3}", "person:Sam"]}
        )
        agent = "sales" if n % 2 else "curator"
        record = await ingest(plain, tokens[agent], content=f"record {n} with 'quotes' é", **fields)
        ids.append(record["id"])
        times.append(datetime.now(UTC).isoformat())
    await plain.data(UPDATE, {"id": ids[0], "content": "changed"}, tokens["curator"])
    await plain.data(ADD, {"id": ids[1], "properties": ["topic:renewal"]}, tokens["sales"])
    times.append(datetime.now(UTC).isoformat())
    first = await plain.data(
        '{ g: gather(match: ["org:Acme"], first: 2) { pageInfo { endCursor } } '
        "r: records(first: 2) { pageInfo { endCursor } } }",
        {},
        tokens["curator"],
    )
    cursors = [first["g"]["pageInfo"]["endCursor"], first["r"]["pageInfo"]["endCursor"]]
    pools: dict[str, list[Any]] = {
        "id": [ids[0], ids[1], ids[2][:9], "sr_" + "0" * 32, "sr_abc", "not-an-id", ids[3]],
        "recordId": [None, ids[0], ids[1][:10]],
        "asOf": [None, times[2], times[0], times[-1], "2026-01-01T00:00:00"],
        "match": [
            ["org:Acme"],
            ["org:Acme", "person:Sam"],
            ["topic:t0", "org:Acme", "topic:renewal"],
            ["e_adjustment:x"],
            [],
            ["person:Sam", "person: Sam ", "org:Acme"],
        ],
        "mode": [None, "UNION", "TIMELINE", "INTERSECT"],
        "first": [None, 1, 2, 0, 501, 3],
        "after": [None, *cursors, "bad", None, "WyJ4Il0"],
        "lanes": [None, ["crm"], ["notes", "crm", "nope"], []],
        "property": ["org:Acme", "person:Sam", "org:Nobody", "bad label:x"],
    }
    compiled = await start_gateway(policy_yaml=crm_yaml, database_url=plain.database_url)
    return World(compiled, plain, tokens, pools)


SUITE_DOCUMENTS = read_documents()
EXTRA = [
    # Fragments, aliases, __typename, nested pages and versions: what agents send.
    f"""
    query($id: ID!, $asOf: DateTime) {{
      one: record(id: $id, asOf: $asOf) {{ ...R __typename versions {{ number at event actor
        content properties lane sourceType authority policyVersion hash __typename }} }}
      again: record(id: $id) {{ id ... on Record {{ content }} }}
      __typename
    }}
    fragment R on Record {{ {RECORD_FIELDS} edgeProperties {{ memberCount
      members(first: 2) {{ totalCount items {{ id }} pageInfo {{ hasNextPage endCursor }} }} }} }}
    """,
    """
    query($property: String!, $asOf: DateTime, $first: Int, $after: String) {
      edgeProperty(property: $property, asOf: $asOf) {
        id property label value memberCount __typename
        members(first: $first, after: $after) { __typename totalCount
          items { id content updatedAt version edgeProperties { id property } }
          pageInfo { __typename hasNextPage endCursor } }
      }
    }
    """,
    """
    query($first: Int, $after: String) {
      records(first: $first, after: $after) { items { id createdAt } pageInfo { endCursor } }
      crm: records(lane: "crm", sourceType: "meeting") { totalCount items { id lane } }
      none: records(lane: "nope") { totalCount items { id } pageInfo { hasNextPage endCursor } }
    }
    """,
    GATHER.replace("totalCount", "pageInfo { hasNextPage }"),
    RECORD,
    # Not compiled: directives, introspection, and fields outside the compiler.
    "query($id: ID!) { record(id: $id) { id content @include(if: false) } }",
    "{ __schema { queryType { name } } labels { label recordCount } }",
]


@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a or "no-token")
async def test_every_read_of_the_suite_answers_the_same(world: World, agent: str | None) -> None:
    assert len(SUITE_DOCUMENTS) >= 8, SUITE_DOCUMENTS
    answered = await answered_by_path(
        world.compiled,
        [*SUITE_DOCUMENTS, *EXTRA],
        world.pools,
        lambda query, variables: world.both(query, variables, agent),
    )
    if agent is not None:
        # Most of the corpus was answered by the compiled path, not only declined.
        assert answered >= 40, answered


def restricted_sdl() -> str:
    """The exported schema with only the compiled root fields and object fields."""
    from gql.compiled.plan import FIELDS
    from gql.schema import schema

    types = []
    graphql_schema = schema._schema
    for type_name, fields in FIELDS.items():
        gtype = graphql_schema.get_type(type_name)
        lines = []
        for name, field in gtype.fields.items():  # type: ignore[union-attr]
            if name not in fields:
                continue
            args = ", ".join(f"{a}: {arg.type}" for a, arg in field.args.items())
            lines.append(f"  {name}{f'({args})' if args else ''}: {field.type}")
        types.append(f"type {type_name} {{\n" + "\n".join(lines) + "\n}")
    return "scalar DateTime\nenum GatherMode { INTERSECT UNION TIMELINE }\n" + "\n".join(types)


def generated_documents(count: int) -> list[str]:
    times = st.sampled_from(
        ["2000-01-01T00:00:00Z", "2030-01-01T00:00:00+02:00", datetime.now(UTC).isoformat()]
    ).map(lambda t: StringValueNode(value=t))
    strategy = queries(restricted_sdl(), fields=COMPILED_ROOTS, custom_scalars={"DateTime": times})
    return drawn(strategy, count)


async def test_generated_queries_answer_the_same(world: World) -> None:
    documents = generated_documents(120)
    for query, agent in zip(documents, itertools.cycle(AGENTS), strict=False):
        await world.both(query, {}, agent)
