"""The compiled write path answers `ingest` and `ingestMany` exactly as strawberry does.

Two gateways on one database, one with the compiled path and one without. Each call
goes to both with the same idempotency key in every input: the first call writes (or
is refused), the second answers the same record from its key (or is refused the same
way), so the two bodies must be equal, ids and times included; which gateway goes
first alternates. The documents are every single-`ingest`/`ingestMany` document of the
test suite and shapes agents send (fragments, aliases, __typename, edge properties,
merged keys, and shapes the compiled path declines), under every agent of a
multi-lane policy, with inputs that are written, refused by the guard or the store,
or do not coerce; a call without a token is refused before either path runs.
Documents with literal inputs and documents generated from the schema are compared
with record ids and times blanked.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from graphql import FieldNode, OperationType
from hypothesis_graphql import mutations

from tests.conftest import GatewayFactory
from tests.gql._differential import (
    AGENTS,
    Pair,
    answered_by_path,
    compiled_path,
    drawn,
    refused_before_compiling,
    suite_operations,
)
from tests.gql._policy_support import ingest, mint

TESTS = Path(__file__).resolve().parent
WRITES = ("ingest", "ingestMany")
RECORD = "id lane sourceType authority content version createdAt updatedAt createdBy properties"


def write_documents() -> list[str]:
    """Every document of the GraphQL tests that is one `ingest` or `ingestMany`."""
    found = []
    for text, operations in suite_operations():
        if len(operations) != 1 or operations[0].operation is not OperationType.MUTATION:
            continue
        fields = operations[0].selection_set.selections
        if len(fields) == 1 and isinstance(fields[0], FieldNode) and fields[0].name.value in WRITES:
            found.append(text)
    return found


EXTRA = [
    f"""
    mutation Write($input: IngestInput!) {{
      w: ingest(input: $input) {{
        __typename ...R again: id
        edgeProperties {{ __typename property ... on EdgeProperty {{ label value id }} }}
      }}
    }}
    fragment R on Record {{ {RECORD} }}
    """,
    """
    mutation($inputs: [IngestInput!]!) {
      ingestMany(inputs: $inputs) { id properties edgeProperties { property } }
    }
    """,
    # One key asked for twice, with different sub-selections: merged.
    """
    mutation($input: IngestInput!) {
      ingest(input: $input) { id edgeProperties { id } }
      ingest(input: $input) { content edgeProperties { label } }
    }
    """,
    # Declined by the compiled path (strawberry answers): a directive, a field with a
    # resolver of its own, two root fields.
    "mutation($input: IngestInput!) { ingest(input: $input) { id content @skip(if: true) } }",
    "mutation($input: IngestInput!) { ingest(input: $input) { id versions { number } } }",
    """
    mutation($input: IngestInput!, $inputs: [IngestInput!]!) {
      a: ingest(input: $input) { id }
      b: ingestMany(inputs: $inputs) { id }
    }
    """,
]

LITERAL = [
    'mutation { ingest(input: {content: "lit", lane: "notes", properties: ["org:Acme"]}) '
    f"{{ {RECORD} edgeProperties {{ id property }} }} }}",
    'mutation { ingestMany(inputs: [{content: "a", lane: "notes"}, {content: "b", lane: "crm", '
    'sourceType: "meeting", properties: ["person:Sam"]}]) { id content lane createdAt } }',
    'mutation { ingest(input: {content: "x", lane: "crm", sourceType: "meeting", '
    'properties: ["stage:won"]}) { id } }',
]


def inputs(adjustable: str) -> list[Any]:
    """Single inputs: written, refused (lane, vocabulary, syntax, content, adjusts) or malformed."""
    return [
        {"content": "note", "lane": "notes", "properties": ["org:Acme", "topic:renewal"]},
        {
            "content": "met Sam",
            "lane": "crm",
            "sourceType": "meeting",
            "properties": ["person:Sam"],
        },
        {"content": "default lane"},
        {"content": "deal", "lane": "crm", "sourceType": "deal", "properties": ["stage:maybe"]},
        {"content": "meet", "lane": "crm", "sourceType": "meeting", "properties": ["stage:won"]},
        {"content": "x", "lane": "notes", "properties": ["no colon here"]},
        {"content": "not json", "lane": "crm", "sourceType": "report"},
        {"content": '{"title": "Q3"}', "lane": "crm", "sourceType": "report"},
        {"content": "adjusts", "lane": "notes", "adjusts": [adjustable]},
        {"content": "adjusts nothing", "lane": "notes", "adjusts": ["sr_abc"]},
        {"content": "nowhere", "lane": "nope"},
        {"content": "z" * 1_000_001, "lane": "notes"},
        {"content": "é 'quotes' \"and\" \\ slashes", "lane": "notes", "sourceType": "documentary"},
        {"lane": "notes"},
        {"content": 5},
        "not an object",
    ]


def many(single: list[Any]) -> list[Any]:
    return [[], [single[0], single[1]], [single[0], single[3]], [single[0]] * 3, "x", [single[-3]]]


def keyed(value: Any, key: str) -> Any:
    """The value with an idempotency key in each input object (others as they are)."""
    if isinstance(value, dict):
        return {**value, "idempotencyKey": key}
    if isinstance(value, list):
        return [keyed(v, f"{key}-{n}") for n, v in enumerate(value)]
    return value


MADE = re.compile(r"^(sr|ep)_[0-9a-f]{32}$")


def blanked(value: Any) -> Any:
    """The body with made ids and times blanked, to compare two writes of the same input."""
    if isinstance(value, dict):
        return {k: blanked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [blanked(v) for v in value]
    if isinstance(value, str):
        if MADE.match(value):
            return "<id>"
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return value
        return "<time>"
    return value


@dataclass
class World(Pair):
    calls: int = 0

    async def both(self, query: str, variables: dict[str, Any], agent: str) -> None:
        """The same call (same idempotency keys) to both gateways: equal bodies."""
        self.calls += 1
        token = self.tokens[agent]
        with_keys = {n: keyed(v, f"k{self.calls}") for n, v in variables.items()}
        if with_keys == variables:
            # Nothing to key (inputs written in the document): two writes, compared as such.
            await self.alike(query, variables, agent)
            return
        variables = with_keys
        first, second = (
            (self.compiled, self.plain) if self.calls % 2 else (self.plain, self.compiled)
        )
        one = await first.post(query, variables, token)
        two = await second.post(query, variables, token)
        assert one == two, (query, variables, agent)

    async def alike(self, query: str, variables: dict[str, Any], agent: str) -> None:
        """A call without keys to both: equal bodies but for made ids and times."""
        token = self.tokens[agent]
        expected = await self.plain.post(query, variables, token)
        got = await self.compiled.post(query, variables, token)
        assert blanked(got) == blanked(expected), (query, variables, agent)


@pytest.fixture(scope="module")
async def world(start_gateway: GatewayFactory, crm_yaml: str) -> World:
    plain = await start_gateway(policy_yaml=crm_yaml, compiled_path=False)
    tokens = await mint(plain, "curator", "sales", "planner")
    earlier = await ingest(plain, tokens["curator"], content="earlier", lane="notes")
    single = inputs(earlier["id"])
    pools: dict[str, list[Any]] = {"input": single, "inputs": many(single)}
    path = await start_gateway(policy_yaml=crm_yaml, database_url=plain.database_url)
    return World(path, plain, tokens, pools)


SUITE_DOCUMENTS = write_documents()


@pytest.mark.parametrize("agent", AGENTS)
async def test_every_write_of_the_suite_answers_the_same(world: World, agent: str) -> None:
    assert len(SUITE_DOCUMENTS) >= 3, SUITE_DOCUMENTS
    answered = await answered_by_path(
        world.compiled,
        [*SUITE_DOCUMENTS, *EXTRA, *LITERAL],
        world.pools,
        lambda query, variables: world.both(query, variables, agent),
    )
    # Most calls were answered by the compiled path (written or refused there).
    assert answered >= 40, answered


async def test_writes_without_a_token_are_refused_before_compiling(world: World) -> None:
    sent = await refused_before_compiling(world, [*SUITE_DOCUMENTS, *EXTRA, *LITERAL], world.pools)
    assert sent >= 20, sent


def restricted_sdl() -> str:
    """The exported schema's two covered mutations, with the fields they may select."""
    return f"""
    type Query {{ unused: Int }}
    input IngestInput {{
      content: String! properties: [String!] sourceType: String lane: String
      idempotencyKey: String adjusts: [ID!]
    }}
    type EdgeProperty {{ id: ID property: String! label: String! value: String! }}
    type Record {{
      id: ID! lane: String! sourceType: String! authority: String! content: String!
      version: Int! createdAt: String! updatedAt: String! createdBy: String!
      properties: [String!]! edgeProperties: [EdgeProperty!]!
    }}
    type Mutation {{
      ingest(input: IngestInput!): Record!
      ingestMany(inputs: [IngestInput!]!): [Record!]!
    }}
    # {RECORD}
    """


def generated_documents(count: int, root: str) -> list[str]:
    """Documents of one root field (the compiled path takes one), generated from the schema."""
    return drawn(mutations(restricted_sdl(), fields=[root]), count)


async def test_generated_writes_answer_the_same(world: World) -> None:
    path = compiled_path(world.compiled)
    before = path.answered
    documents = [d for root in WRITES for d in generated_documents(30, root)]
    for query, agent in zip(documents, itertools.cycle(AGENTS), strict=False):
        await world.alike(query, {}, agent)
    assert path.answered - before >= 20, path.answered - before
