"""The compiled read path answers exactly as strawberry does, and in one statement.

Two gateways on one database, one with the compiled path and one without, get the
same requests: every read document of the test suite with variables drawn from the
data (ids, prefixes, cursors, times, bad values too), plus documents generated from
the schema restricted to the compiled fields, under every agent of a multi-lane
policy. The parsed responses must be equal, errors included; each test counts the
calls the compiled path answered, and calls without a token are refused before either
path runs.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from graphql import IntValueNode, ListValueNode, OperationType, StringValueNode, parse
from hypothesis import strategies as st
from hypothesis_graphql import queries

from gql.api.compiled.fields import compiled_fields
from gql.api.cost import DEFAULT_MAX_COST, query_cost
from gql.api.schema import schema
from tests.conftest import GatewayFactory
from tests.gql._api import GATHER, RECORD, RECORD_FIELDS, REMOVE, RESTORE_RECORD, RETIRE_RECORD
from tests.gql._asserted import CONNECT, CORRECT, DISCONNECT, GROUP, UNADJUST, UNGROUP
from tests.gql._differential import (
    AGENTS,
    Pair,
    answered_by_path,
    compiled_path,
    drawn,
    refused_before_compiling,
    suite_operations,
)
from tests.gql._edges import EDGE_FIELDS, EDGES, RESOLVE, RETIRE, upsert
from tests.gql._policy_support import ADD, UPDATE, ingest, mint
from tests.support import Gateway

TESTS = Path(__file__).resolve().parent


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


@dataclass
class World(Pair):
    # Every record's id, and instants between the changes of their edges and corrections.
    records: list[str] = field(default_factory=list)
    instants: list[str | None] = field(default_factory=list)
    # Records retired (now): a read naming one is refused, so the compiled path declines it.
    retired: list[str] = field(default_factory=list)
    # Instants before and between the changes of the typed edges.
    edge_instants: list[str] = field(default_factory=list)

    async def both(self, query: str, variables: dict[str, Any], agent: str) -> None:
        token = self.tokens[agent]
        path = compiled_path(self.compiled)
        before = path.answered
        expected = await self.plain.post(query, variables, token)
        got = await self.compiled.post(query, variables, token)
        declined = path.answered == before
        if declined and got.get("data") is None and expected.get("data") is None:
            # Both answers come from strawberry here, and a null root field stops its
            # execution at its error, so which errors of the other root fields made it
            # in is a matter of timing: compare the ones both answers hold.
            mine = {str(e.get("path")): e for e in got.get("errors", [])}
            theirs = {str(e.get("path")): e for e in expected.get("errors", [])}
            both = mine.keys() & theirs.keys()
            assert both, (query, variables, agent, got, expected)
            assert all(mine[k] == theirs[k] for k in both), (query, variables, agent)
            return
        # Equal, and with the keys in the same order (the selection's, as GraphQL orders them).
        ordered = json.dumps(in_order(got)) == json.dumps(in_order(expected))
        assert ordered, (query, variables, agent, got, expected)


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
    await asserted_edges(plain, tokens, ids, times)
    retired = await retired_records(plain, tokens, ids, times)
    edge_times: list[str] = []
    edge_cursor = await typed_edges(plain, tokens, ids, retired, edge_times)
    first = await plain.data(
        '{ g: gather(match: ["org:Acme"], first: 2) { pageInfo { endCursor } } '
        "r: records(first: 2) { pageInfo { endCursor } } }",
        {},
        tokens["curator"],
    )
    cursors = [first["g"]["pageInfo"]["endCursor"], first["r"]["pageInfo"]["endCursor"]]
    pools: dict[str, list[Any]] = {
        "id": [
            ids[0],
            ids[1],
            ids[2][:9],
            "sr_" + "0" * 32,
            "sr_abc",
            "not-an-id",
            *ids[3:],
            *retired,
            retired[0][:10],
        ],
        "recordId": [None, ids[0], ids[1][:10]],
        "asOf": [None, times[2], times[0], *times[-6:], "2026-01-01T00:00:00"],
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
        "lane": [None, "crm", "notes", "nope"],
        "fromId": [None, ids[0], ids[1], ids[1][:10], "sr_" + "0" * 32, retired[0], "x"],
        "toId": [None, ids[3], ids[0], retired[1]],
        "type": [None, "supports", "contradicts", "nope"],
        "namespace": [None, "default", "docs"],
        "includeExpired": [None, True, False],
        "status": [None, "UNRESOLVED", "RESOLVED", "ALL"],
    }
    pools["after"].append(edge_cursor)
    pools["asOf"].extend(edge_times[:-1])
    compiled = await start_gateway(policy_yaml=crm_yaml, database_url=plain.database_url)
    instants = [None, times[0], *times[-13::2]]
    gone = [i for i in retired if i != retired[1]]  # the second one is restored
    return World(compiled, plain, tokens, pools, ids, instants, gone, [times[0], *edge_times])


async def asserted_edges(
    plain: Gateway, tokens: dict[str, str], ids: list[str], times: list[str]
) -> None:
    """Connections, groups, adjustment chains and corrections over records in a lane some
    agents cannot read (notes: sales), some changed or ended later; `times` gets an
    instant after each step, for asOf."""
    curator, sales = tokens["curator"], tokens["sales"]

    async def step(query: str, variables: dict[str, Any], token: str) -> dict[str, Any]:
        data: dict[str, Any] = await plain.data(query, variables, token)
        times.append(datetime.now(UTC).isoformat())
        return data

    await step(CONNECT, {"a": ids[0], "b": ids[1], "hint": "works_with"}, curator)
    await step(CONNECT, {"a": ids[1], "b": ids[3], "hint": "knows"}, sales)
    ended = await step(CONNECT, {"a": ids[3], "b": ids[5], "hint": "met"}, sales)
    team = await step(GROUP, {"ids": [ids[0], ids[1], ids[3], ids[5]], "hint": "team"}, curator)
    pair = await step(GROUP, {"ids": [ids[2], ids[4]], "hint": "pair"}, curator)
    await step(UNGROUP, {"id": team["group"]["id"], "ids": [ids[3]]}, curator)
    await step(DISCONNECT, {"id": ended["connect"]["id"]}, sales)
    await step(UNGROUP, {"id": pair["group"]["id"]}, curator)
    fields = {"lane": "crm", "sourceType": "meeting", "properties": ["org:Acme"]}
    second = await ingest(plain, sales, content="adjusts 1", adjusts=[ids[1]], **fields)
    # In notes, it joins the chain of 1 (in crm) and starts one with 2, which then ends.
    third = await ingest(
        plain, curator, content="adjusts 1, 2", adjusts=[ids[1], ids[2]], lane="notes"
    )
    await ingest(plain, curator, content="adjusts the second", adjusts=[second["id"]], **fields)
    ids.extend([second["id"], third["id"]])
    chains = await step(ADJUSTMENTS, {"id": ids[2]}, curator)
    [chain] = chains["record"]["adjustments"]
    await step(UNADJUST, {"id": ids[2], "adjustment": chain["id"]}, curator)
    # A label no record carries any more: counted nowhere.
    await plain.data(ADD, {"id": ids[2], "properties": ["gone:x"]}, curator)
    await step(REMOVE, {"id": ids[2], "properties": ["gone:x"]}, curator)
    await step(CORRECT, {"id": ids[0], "content": "right 0", "reason": "typo"}, curator)
    await step(CORRECT, {"id": ids[1], "content": "right 1"}, sales)
    await step(CORRECT, {"id": ids[1], "content": "right 1 again", "reason": "more"}, curator)


async def retired_records(
    plain: Gateway, tokens: dict[str, str], ids: list[str], times: list[str]
) -> list[str]:
    """Records retired after sharing edge properties and a group with the others: one stays
    retired, one is restored, one is retired, restored and retired again; `times` gets an
    instant after each step. Returns their ids."""
    curator, sales = tokens["curator"], tokens["sales"]
    meeting = {"lane": "crm", "sourceType": "meeting"}
    gone = await ingest(
        plain, curator, content="forget me", lane="notes", properties=["org:Acme", "topic:t0"]
    )
    back = await ingest(plain, sales, content="back again", properties=["org:Acme"], **meeting)
    twice = await ingest(plain, sales, content="twice", properties=["person:Sam"], **meeting)
    made = [gone["id"], back["id"], twice["id"]]
    await plain.data(GROUP, {"ids": [ids[0], *made], "hint": "forgotten"}, curator)
    times.append(datetime.now(UTC).isoformat())
    for record_id, token, mutation in (
        (gone["id"], curator, RETIRE_RECORD),
        (back["id"], sales, RETIRE_RECORD),
        (twice["id"], sales, RETIRE_RECORD),
        (back["id"], sales, RESTORE_RECORD),
        (twice["id"], sales, RESTORE_RECORD),
        (twice["id"], sales, RETIRE_RECORD),
    ):
        await plain.data(mutation, {"id": record_id}, token)
        times.append(datetime.now(UTC).isoformat())
    return made


async def typed_edges(
    plain: Gateway, tokens: dict[str, str], ids: list[str], retired: list[str], times: list[str]
) -> str:
    """Typed edges within and across lanes (notes: sales cannot read it), with evidence,
    updated, retired, a contradiction resolved, and one to a record retired and restored;
    `times` gets an instant after each step. Returns the
    cursor of a first page of edges."""
    curator, sales = tokens["curator"], tokens["sales"]

    def stamp() -> None:
        times.append(datetime.now(UTC).isoformat())

    evidence = {"quote": "it says so", "source": "doc 1", "offset": 3}
    await upsert(
        plain,
        curator,
        fromId=ids[0],
        toId=ids[1],
        type="supports",
        weight=0.5,
        confidence=0.25,
        evidence=evidence,
    )
    stamp()
    clash = await upsert(
        plain,
        sales,
        fromId=ids[1],
        toId=ids[3],
        type="contradicts",
        evidence=[evidence, {"quote": "no"}],
        provenanceType="human",
    )
    stamp()
    gone = await upsert(
        plain,
        sales,
        fromId=ids[3],
        toId=ids[5],
        type="derived_from",
        namespace="docs",
        detector="wikilink@2",
    )
    changed = await upsert(plain, curator, fromId=ids[2], toId=ids[0], type="related_to")
    stamp()
    await upsert(plain, curator, fromId=ids[2], toId=ids[0], type="related_to", weight=0.7)
    await plain.data(RETIRE, {"id": gone["id"]}, sales)
    stamp()
    await plain.data(
        RESOLVE,
        {
            "edgeId": clash["id"],
            "resolution": "SUPERSEDED",
            "resolver": "sales",
            "winnerId": ids[1],
        },
        sales,
    )
    await upsert(plain, sales, fromId=ids[1], toId=retired[1], type="supports", weight=0.125)
    # Contradictions left for a resolver, within a lane and across two.
    await upsert(plain, curator, fromId=ids[0], toId=ids[3], type="contradicts", weight=1)
    await upsert(plain, sales, fromId=ids[3], toId=ids[1], type="contradicts", confidence=0.9)
    stamp()
    assert changed["id"]
    first = await plain.data(EDGES, {"first": 2}, curator)
    cursor: str = first["edges"]["pageInfo"]["endCursor"]
    return cursor


ADJUSTMENTS = "query($id: ID!) { record(id: $id) { adjustments { id } } }"
# Both paths take a read's predicate, order and paging from one builder (its lanes a
# parameter), so what is compared here is the rendering: rows against JSON. Readers of
# every lane (curator; planner reads the same lanes) and of one (sales) render different
# records on the same pages; the typed edges' pages are rendered alike for any reader,
# and sales, who cannot read one end of some, is the one that tells most.
READERS = ("curator", "sales")
PARTIAL = ("sales",)
SUITE_DOCUMENTS = read_documents()
EDGE = """id hint createdAt actor active endedAt endedBy __typename
  records { id version content properties } history { recordId change at actor __typename }"""
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
    # Asserted edges through fragments on their interface, records on them, and labels.
    f"""
    query($id: ID!, $asOf: DateTime, $after: String) {{
      record(id: $id, asOf: $asOf) {{ id corrected
        connections {{ ...E }}
        groups {{ ...E members(first: 2, after: $after) {{ items {{ id adjustments {{ id }} }} }} }}
        adjustments {{ ... on AdjustmentChain {{ id hint records {{ id corrected }} }} }}
      }}
      records(first: 20) {{ items {{ id groups {{ hint }} }} }}
    }}
    fragment E on AssertedEdge {{ {EDGE} }}
    """,
    """
    query($lane: String, $asOf: DateTime) {
      all: labels { label recordCount __typename }
      one: labels(lane: $lane) { recordCount label }
      then: labels(lane: $lane, asOf: $asOf) { recordCount label }
      records(lane: $lane, first: 1) { items { id } }
    }
    """,
    # What a retired record leaves: its retirement on a read (none), and traverse.
    """
    query($id: ID!, $asOf: DateTime) {
      record(id: $id, asOf: $asOf) { id retired { at actor reason } version }
      gather(match: ["org:Acme"], asOf: $asOf) { totalCount items { id retired { at } } }
    }
    """,
    # Not compiled: directives, introspection, and fields outside the compiler.
    "query($id: ID!) { record(id: $id) { id content @include(if: false) } }",
    "{ __schema { queryType { name } } labels { label recordCount } }",
]


@pytest.mark.over10s("every document of the suite, on both paths, checked against each other")
@pytest.mark.parametrize("agent", READERS)
async def test_every_read_of_the_suite_answers_the_same(world: World, agent: str) -> None:
    assert len(SUITE_DOCUMENTS) >= 8, SUITE_DOCUMENTS
    answered = await answered_by_path(
        world.compiled,
        [*SUITE_DOCUMENTS, *EXTRA],
        world.pools,
        lambda query, variables: world.both(query, variables, agent),
    )
    # Most of the corpus was answered by the compiled path, not only declined.
    assert answered >= 40, answered


ASSERTED_EVERYWHERE = f"""
query($id: ID!, $asOf: DateTime, $first: Int) {{
  record(id: $id, asOf: $asOf) {{ id version corrected
    connections {{ ...E }}
    groups {{ ...E members(first: $first) {{ totalCount items {{ id version corrected }}
      pageInfo {{ hasNextPage endCursor }} }} }}
    adjustments {{ ...E }}
    corrections {{ id recordId recordVersion content reason actor at __typename }}
  }}
}}
fragment E on AssertedEdge {{ {EDGE} }}
"""


@pytest.mark.parametrize("agent", AGENTS)
async def test_asserted_edges_and_corrections_answer_the_same(world: World, agent: str) -> None:
    """Every record's connections, groups, chains and corrections, now and as of instants
    between their changes (ended edges, members who left, lanes the agent cannot read)."""
    path = compiled_path(world.compiled)
    before, sent = path.answered, 0
    for record_id in world.records:
        for n, as_of in enumerate(world.instants):
            variables = {"id": record_id, "asOf": as_of, "first": 1 + n % 3}
            await world.both(ASSERTED_EVERYWHERE, variables, agent)
            sent += 1
    assert path.answered - before == sent, (path.answered - before, sent)


TYPED_EDGES = f"""
query($fromId: ID, $toId: ID, $asOf: DateTime, $includeExpired: Boolean, $first: Int) {{
  edges(fromId: $fromId, toId: $toId, asOf: $asOf, includeExpired: $includeExpired,
        first: $first) {{ totalCount items {{ {EDGE_FIELDS} __typename }}
    pageInfo {{ hasNextPage endCursor }} __typename }}
  supports: edges(type: "supports", namespace: "default") {{ totalCount items {{ id weight }} }}
  counted: edges(includeExpired: true) {{ totalCount }}
}}
"""


@pytest.mark.parametrize("agent", PARTIAL)
async def test_typed_edges_answer_the_same(world: World, agent: str) -> None:
    """`edges(...)` from each record and none, now and as of instants between the edges'
    changes, with and without the expired ones: all answered by the compiled path but a
    record named as of an instant (resolved, and refused if retired then, the ordinary way)."""
    path = compiled_path(world.compiled)
    before, expected = path.answered, 0
    for n, (from_id, as_of, expired) in enumerate(
        itertools.product([None, *world.records[:6]], [None, *world.edge_instants], [False, True])
    ):
        variables = {
            "fromId": from_id,
            "asOf": as_of,
            "includeExpired": expired,
            "first": 1 + n % 3,
        }
        await world.both(TYPED_EDGES, variables, agent)
        expected += from_id is None or as_of is None
    for to_id in world.records:
        await world.both(TYPED_EDGES, {"toId": to_id}, agent)
        expected += 1
    assert path.answered - before == expected, (path.answered - before, expected)


AROUND = f"""
query($id: ID!, $namespace: String, $includeExpired: Boolean, $first: Int, $after: String) {{
  related(id: $id, namespace: $namespace, includeExpired: $includeExpired) {{
    recordId record {{ id version content properties }}
    outgoing(first: $first, after: $after) {{
      totalCount items {{ {EDGE_FIELDS} toRecord {{ id content edgeProperties {{ property }} }} }}
      pageInfo {{ hasNextPage endCursor }} }}
    incoming {{ items {{ id weight evidence fromRecord {{ id lane }} toRecord {{ id }} __typename }}
      totalCount __typename }}
    __typename
  }}
}}
"""
QUEUE = """
query($status: ConflictStatus, $lanes: [String!], $first: Int, $after: String) {
  conflicts(status: $status, lanes: $lanes, first: $first, after: $after) {
    totalCount items { id conflictState resolution resolver winnerId provenanceActor
      evidence fromRecord { id content } toRecord { id version } }
    pageInfo { hasNextPage endCursor }
  }
}
"""


@pytest.mark.parametrize("agent", PARTIAL)
async def test_related_and_conflicts_answer_the_same(world: World, agent: str) -> None:
    """`related` of every record (those the agent cannot read or that are retired are
    refused the ordinary way), by namespace, with and without the expired edges, the
    outgoing page paged through with its own cursors; and the
    review queue by status and lanes, paged through with its own cursors."""
    path = compiled_path(world.compiled)
    before, sent = path.answered, 0
    for record_id, namespace, expired, first in itertools.product(
        world.records, [None, "docs"], [False, True], [None, 1]
    ):
        variables = {
            "id": record_id,
            "namespace": namespace,
            "includeExpired": expired,
            "first": first,
        }
        # The outgoing page, paged through with its own cursors.
        while True:
            await world.both(AROUND, variables, agent)
            around = await world.plain.post(AROUND, variables, world.tokens[agent])
            if around.get("data") is None:
                break
            info = around["data"]["related"]["outgoing"]["pageInfo"]
            if not info["hasNextPage"]:
                break
            variables = {**variables, "after": info["endCursor"]}
    related = path.answered - before
    # The records of lanes the agent cannot read are declined (refused), the others not.
    assert related >= 4 * 4 * 2, related
    for status, lanes, first in itertools.product(
        [None, "RESOLVED", "ALL"], [None, ["crm"], ["notes"]], [1, 2, 50]
    ):
        variables: dict[str, Any] = {"status": status, "lanes": lanes, "first": first}
        page = await world.plain.data(QUEUE, variables, world.tokens[agent])
        while True:
            await world.both(QUEUE, variables, agent)
            sent += 1
            info = page["conflicts"]["pageInfo"]
            if not info["hasNextPage"]:
                break
            variables = {**variables, "after": info["endCursor"]}
            page = await world.plain.data(QUEUE, variables, world.tokens[agent])
    assert path.answered - before - related == sent, (
        path.answered - before - related,
        sent,
    )


WALK = f"""
query($from: ID!, $depth: Int, $labels: [String!], $asOf: DateTime, $limit: Int,
      $edgeTypes: [String!]) {{
  traverse(from: $from, depth: $depth, labels: $labels, asOf: $asOf, limit: $limit,
           edgeTypes: $edgeTypes) {{
    items {{ hop via record {{ id version content properties }}
      edge {{ {EDGE_FIELDS} fromRecord {{ id }} __typename }} __typename }}
    notShown notShownExact beyondLimit clipped {{ via hop memberCount memberCountExact }}
    __typename
  }}
  short: traverse(from: $from, limit: 1) {{ items {{ record {{ id }} }} notShown }}
}}
"""
# depth, labels, edgeTypes, limit
WALKS = [
    (1, None, None, None),
    (2, None, None, 3),
    (3, ["org", "e_group"], [], None),
    (2, [], ["supports", "contradicts"], None),
    (3, None, ["related_to"], 100),
]


@pytest.mark.parametrize("agent", AGENTS)
async def test_traverse_answers_the_same(world: World, agent: str) -> None:
    """`traverse` from every record (retired ones and those of lanes the agent cannot
    read are refused the ordinary way), over edge properties and typed edges, now and as
    of instants between the edges' changes: the walk is one, its two renderings agree."""
    path = compiled_path(world.compiled)
    before, sent = path.answered, 0
    edge_instants = world.edge_instants
    instants = [None, edge_instants[len(edge_instants) // 2], world.instants[2]]
    for start, as_of, (depth, labels, types, limit) in itertools.product(
        [*world.records, *world.retired], instants, WALKS
    ):
        variables = {
            "from": start,
            "asOf": as_of,
            "depth": depth,
            "labels": labels,
            "edgeTypes": types,
            "limit": limit,
        }
        await world.both(WALK, variables, agent)
        sent += 1
    # Starts the agent cannot read (or retired) are refused, so declined; most are not.
    assert path.answered - before >= sent // 3, (path.answered - before, sent)


async def test_reads_without_a_token_are_refused_before_compiling(world: World) -> None:
    sent = await refused_before_compiling(world, [*SUITE_DOCUMENTS, *EXTRA], world.pools)
    assert sent >= 40, sent


# Arguments of the compiled fields drawn from the data, so that a generated document is
# bound and answered by the compiled path rather than declined at its first made-up id.
ARGUMENT_SCALARS = {
    "id": "Ident!",
    "property": "Prop!",
    "match": "Props!",
    "lanes": "[Lane!]",
    "lane": "Lane",
    "sourceType": "Source",
    "first": "Page",
    "fromId": "FullIdent",
    "toId": "FullIdent",
    "text": "Words!",
    "from": "Ident!",
    "depth": "Depth",
    "limit": "Page",
    "labels": "Labels",
    "edgeTypes": "Types",
}


# What the compiled path leaves to strawberry by design, left out of generated documents
# (the tests above send them): a record named by `edges` as of an instant, and `related`
# (a record the caller cannot read is refused there, so declined).
DECLINED_ARGUMENTS = {("edges", "asOf")}
DECLINED_ROOTS = {"related"}


def restricted_sdl() -> str:
    """The exported schema with only the compiled root fields and object fields, their
    arguments typed by `ARGUMENT_SCALARS`."""
    types = []
    for type_name, fields in compiled_fields(schema._schema).items():
        lines = []
        for name, definition in fields.items():
            args = ", ".join(
                f"{a}: {ARGUMENT_SCALARS.get(a, arg.type)}"
                for a, arg in definition.args.items()
                if a != "after" and (name, a) not in DECLINED_ARGUMENTS
            )
            lines.append(f"  {name}{f'({args})' if args else ''}: {definition.type}")
        types.append(f"type {type_name} {{\n" + "\n".join(lines) + "\n}")
    names = ("DateTime", "Ident", "FullIdent", "Prop", "Props", "Lane", "JSON")
    scalars = "".join(f"scalar {name}\n" for name in names)
    return (
        f"{scalars}scalar Source\nscalar Page\nscalar Words\nscalar Depth\nscalar Labels\n"
        "scalar Types\n"
        "enum GatherMode { INTERSECT UNION TIMELINE }\n"
        "enum ConflictResolution { ACCEPTED_DUAL SUPERSEDED REFUTED MERGED }\n"
        "enum ConflictStatus { UNRESOLVED RESOLVED ALL }\n"
        "enum SearchSyntax { NATURAL STRICT }\n" + "\n".join(types)
    )


def generated_documents(world: World, count: int) -> list[str]:
    def text(values: list[str]) -> st.SearchStrategy[StringValueNode]:
        return st.sampled_from(values).map(lambda v: StringValueNode(value=v))

    # A retired record's reads are declined (the ordinary path words the refusal): the
    # suite's documents ask them; these aim at what the compiled path answers.
    ids = [
        i
        for i in world.pools["id"]
        if i.startswith("sr_") and len(i) > 8 and not any(r.startswith(i) for r in world.retired)
    ]
    properties = ["org:Acme", "person:Sam", "topic:t0", "topic:renewal"]
    custom = {
        "DateTime": text(
            ["2000-01-01T00:00:00Z", "2030-01-01T00:00:00+02:00", datetime.now(UTC).isoformat()]
        ),
        "Ident": text(ids),
        "FullIdent": text([i for i in ids if len(i) == 35]),
        "Prop": text(properties),
        # A gather needs one property at least; an empty match is refused, so declined.
        "Props": st.lists(text(properties), min_size=1, max_size=3).map(
            lambda values: ListValueNode(values=tuple(values))
        ),
        "Lane": text(["crm", "notes"]),
        # Search words (an empty text is refused, so declined).
        "Words": text(["renewal", "acme deal", '"renewal risk"', "ren", "-deal note"]),
        "Source": text(["meeting", "note"]),
        "Page": st.sampled_from([1, 2, 3, 50]).map(lambda n: IntValueNode(value=str(n))),
        "Depth": st.sampled_from([1, 2, 3]).map(lambda n: IntValueNode(value=str(n))),
        # A walk over labels (at least one: with no type either it is refused) and types.
        "Labels": st.lists(text(["org", "person", "topic", "e_group"]), min_size=1).map(
            lambda values: ListValueNode(values=tuple(values))
        ),
        "Types": st.lists(text(["supports", "contradicts", "related_to"])).map(
            lambda values: ListValueNode(values=tuple(values))
        ),
    }
    roots = tuple(f for f in compiled_fields(schema._schema)["Query"] if f not in DECLINED_ROOTS)
    strategy = queries(restricted_sdl(), fields=roots, custom_scalars=custom)
    return drawn(strategy, count)


def within_cost(query: str) -> bool:
    """Whether the gateway takes the query: one over its cost limit (lists nested in lists)
    is refused the ordinary way before the compiled path would read it."""
    return query_cost(schema._schema, parse(query), None, {}) <= DEFAULT_MAX_COST


async def test_generated_queries_answer_the_same(world: World) -> None:
    documents = [d for d in generated_documents(world, 200) if within_cost(d)][:120]
    assert len(documents) >= 100, len(documents)
    path = compiled_path(world.compiled)
    before = path.answered
    for query, agent in zip(documents, itertools.cycle(AGENTS), strict=False):
        await world.both(query, {}, agent)
    # The generator aims at what the compiled path takes: nearly all were answered there,
    # but a search by vector: drawn vectors are not of the size the policy declares (or
    # the server has no pgvector), refused alike on both paths; test_search_vectors
    # compares the two paths on vectors of the right size.
    takes = [d for d in documents if "vector:" not in d]
    assert path.answered - before >= len(takes) - 10, (path.answered - before, len(takes))
