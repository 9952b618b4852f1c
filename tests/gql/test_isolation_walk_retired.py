"""Isolation from retirement, generated from the schema: what a reader sees of a memory
whose records were retired equals what it sees of the same memory where they were never
written, and asOf an instant before the retirement what it saw then (the walk and the
script that writes the worlds are tests/gql/_isolation.py's, shared with
test_isolation_walk.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import GatewayFactory
from tests.gql._isolation import (
    POLICY,
    Namer,
    World,
    first_difference,
    over_cost,
    queries,
    write,
)
from tests.gql._policy_support import mint


@pytest.fixture(scope="module")
async def bare(start_gateway: GatewayFactory) -> World:
    """The world the hidden part was never written to (the hidden-lane walk's full world is
    not needed here: the retired world stands in for it)."""
    gateway = await start_gateway(policy_yaml=POLICY)
    world = World(gateway, await mint(gateway, "reader", "curator"))
    await write(world, hidden=False)
    return world


# -- the retired mode ---------------------------------------------------------------
# The same script with its hidden part written in the reader's own lane, then retired:
# every current answer equals the bare world's (where that part was never written), and
# every answer asOf an instant before the retirement equals the answer before it. The
# audit trail is history and keeps every event, so `audit`, `auditEvent` and the feed
# are not walked here (test_isolation_walk.py's walk covers them).
FORGOTTEN = ("h1", "h2", "h3")
HISTORY = {"audit", "auditEvent"}
RETIRE_AS_CURATOR = 'mutation($id: ID!) { retireRecord(id: $id, reason: "forgotten") { id } }'


def current_walk(world: World, depth: int) -> list[tuple[str, str]]:
    return [(name, doc) for name, doc in queries(world, depth) if name not in HISTORY]


@pytest.fixture(scope="module")
async def forgetting(start_gateway: GatewayFactory, bare: World) -> tuple[World, dict[str, Any]]:
    """The retired world, and the answers to its asOf documents before the retirement."""
    gateway = await start_gateway(policy_yaml=POLICY)
    world = World(gateway, await mint(gateway, "reader", "curator"))
    await write(world, hidden=True, lane="open")
    # The retired records' ids mean nothing in the bare world: asked there, they must be
    # answered as ids of nothing (the walks' argument lists then match one for one).
    bare.ids |= {k: v for k, v in world.ids.items() if k not in bare.ids}
    before: dict[str, Any] = {}
    for depth in (3, 2, 1):
        for _, document in current_walk(world, depth):
            if "asOf:" in document and document not in before:
                before[document] = await gateway.post(document, {}, world.tokens["reader"])
    for name in FORGOTTEN:
        await world.as_agent("curator", RETIRE_AS_CURATOR, {"id": world.ids[name]})
    # The ordinary path too, on the same database: the walk's documents are mostly
    # answered by the compiled path.
    world.plain = await start_gateway(
        policy_yaml=POLICY, database_url=gateway.database_url, compiled_path=False
    )
    return world, before


@pytest.mark.over10s("every query field at each depth, before and after, on two paths")
async def test_every_query_field_answers_as_if_the_retired_records_were_never_written(
    bare: World, forgetting: tuple[World, dict[str, Any]]
) -> None:
    world, before = forgetting
    walks = {
        "retired": {d: current_walk(world, d) for d in (3, 2, 1)},
        "bare": {d: current_walk(bare, d) for d in (3, 2, 1)},
    }
    assert len(walks["retired"][1]) == len(walks["bare"][1])
    retired_ids = [world.ids[name] for name in FORGOTTEN]
    assert world.plain is not None
    # Per path (compiled, ordinary): a namer for its answers and one for the bare world's.
    names = [(Namer(), Namer()), (Namer(), Namer())]
    compared = as_of = refused = 0
    for i in range(len(walks["bare"][1])):
        for depth in (3, 2, 1):
            document = walks["bare"][depth][i][1]
            seen_bare = await bare.gateway.post(document, {}, bare.tokens["reader"])
            if not over_cost(seen_bare):
                break
        mine = walks["retired"][depth][i][1]
        for path, gateway in enumerate((world.gateway, world.plain)):
            seen = await gateway.post(mine, {}, world.tokens["reader"])
            if "asOf:" in mine:
                # As of an instant before the retirement: exactly as it was answered then.
                assert seen == before[mine], (path, mine)
                as_of += 1
            elif seen.get("errors") and any(f'"{rid}"' in mine for rid in retired_ids):
                # Named by its id, a retired record is refused saying so (never answered).
                assert seen["data"] is None or None in seen["data"].values(), mine
                codes = {e["extensions"]["code"] for e in seen["errors"]}
                assert codes == {"NOT_FOUND"}, (path, mine)
                assert all("retired" in e["extensions"] for e in seen["errors"]), (path, mine)
                refused += 1
            else:
                a, b = names[path][0](seen), names[path][1](seen_bare)
                assert a == b, (path, mine, first_difference(a, b))
                compared += 1
    assert compared >= 80 and as_of >= 20 and refused >= 6, (compared, as_of, refused)
