"""Isolation, generated from the schema: what a reader sees of a memory holding a lane it
cannot read equals what it sees of the same memory without that lane ever written.

Two databases are written by the same script: one with records, asserted edges,
corrections and changes in a lane the reader cannot read (sharing edge properties with
the reader's records, and a group joining records of both lanes), the other with only
the reader's part. The walk visits every
`Query` field and every object field reachable from it, selecting every field of each
type to a depth, with arguments drawn from both worlds' data (the hidden records' ids
included), and the `auditEvents` subscription replayed from the start. Every answer of
the reader must be the same in both worlds once made ids, times, hashes and cursors are
named by order of appearance. A new field is walked without anyone adding a case; a
field the walk cannot reach must be listed in `UNWALKED` with the reason.
The retired mode's walk is in test_isolation_walk_retired.py (a file of its own, so the
two long walks run on two workers).
"""

from __future__ import annotations

import pytest
from graphql import GraphQLObjectType

from gql.api.schema import schema
from tests.conftest import GatewayFactory
from tests.gql._feed import feed_client
from tests.gql._isolation import (
    UNWALKED,
    Namer,
    World,
    first_difference,
    make_worlds,
    over_cost,
    queries,
    selection,
)


@pytest.fixture(scope="module")
async def worlds(start_gateway: GatewayFactory) -> tuple[World, World]:
    return await make_worlds(start_gateway)


@pytest.mark.over10s("every query field at each depth, in two worlds, compared")
async def test_every_query_field_answers_as_if_the_hidden_lane_never_existed(
    worlds: tuple[World, World],
) -> None:
    full, bare = worlds
    # Documents by depth, in the same order in both worlds (ids differ, positions match).
    walks = {i: {d: list(queries(w, d)) for d in (3, 2, 1)} for i, w in enumerate(worlds)}
    reached = {name for name, _ in walks[1][1]}
    query_type = schema._schema.query_type
    assert query_type is not None
    missing = set(query_type.fields) - reached - {n for t, n in UNWALKED if t == "Query"}
    assert not missing, f"Query fields the walk cannot reach (add to UNWALKED): {missing}"
    names = (Namer(), Namer())
    compared = 0
    for i in range(len(walks[1][1])):
        # The deepest selection the cost limit allows.
        for depth in (3, 2, 1):
            document = walks[1][depth][i][1]
            seen_bare = await bare.gateway.post(document, {}, bare.tokens["reader"])
            if not over_cost(seen_bare):
                break
        assert not over_cost(seen_bare), document
        seen_full = await full.gateway.post(walks[0][depth][i][1], {}, full.tokens["reader"])
        a, b = names[0](seen_full), names[1](seen_bare)
        assert a == b, (document, first_difference(a, b))
        compared += 1
    assert compared >= 60, compared


async def test_the_feed_replays_as_if_the_hidden_lane_never_existed(
    worlds: tuple[World, World],
) -> None:
    event_type = schema._schema.get_type("AuditEvent")
    assert isinstance(event_type, GraphQLObjectType)
    document = (
        f"subscription {{ auditEvents(after: $after) {{ {selection(worlds[1], event_type, 2)} }} }}"
    ).replace("subscription {", "subscription($after: String) {")
    replayed = []
    for world in worlds:
        total = (await world.as_agent("reader", "{ audit { totalCount } }", {}))["audit"]
        async with feed_client(world.gateway, world.tokens["reader"]) as client:
            await client.subscribe("w", document, after="0")
            events = await client.events("w", total["totalCount"])
            await client.nothing("w", 1.0)
        replayed.append(Namer()(events))
    assert replayed[0] == replayed[1]
