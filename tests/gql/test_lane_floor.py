"""The floor under the guard: PostgreSQL alone keeps a hidden lane hidden (migration 0032).

The isolation walk's world is written once, with a lane its reader cannot read. Then the
guard is broken on purpose: statements that name the hidden lane outright, run with the
reader's lanes, and every `Query` field the generated walk knows, asked with the gateway's
lane predicate removed (`Rule.lane` and `Rule.in_lane` answer `true`). With the policies
on, PostgreSQL answers each as if the hidden lane did not exist; the same run with the
policies switched off shows the hidden lane, so the test can fail.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from gql.server import compiled_endpoint
from store.reads import lane_floor
from store.reads.visibility import Rule
from tests.conftest import GatewayFactory
from tests.gql._isolation import POLICY, World, queries, write
from tests.gql._policy_support import mint

LANE_TABLES: tuple[str, ...] = importlib.import_module(
    "store.migrations.versions.0032_lane_policies"
).LANE_TABLES


@pytest.fixture(scope="module")
async def world(start_gateway: GatewayFactory) -> World:
    gateway = await start_gateway(policy_yaml=POLICY)
    made = World(gateway, await mint(gateway, "reader", "curator"))
    await write(made, hidden=True)
    return made


def pool(world: World) -> Any:
    assert world.gateway.state is not None
    return world.gateway.state["services"].pool


async def policies(world: World, on: bool) -> None:
    """Switch the lanes' row-level security on or off, as the owner."""
    conn = await asyncpg.connect(world.gateway.database_url)
    try:
        for table in LANE_TABLES:
            await conn.execute(
                f"ALTER TABLE {table} {'ENABLE' if on else 'DISABLE'} ROW LEVEL SECURITY"
            )
    finally:
        await conn.close()


@pytest.fixture
async def switched(world: World, request: pytest.FixtureRequest) -> AsyncIterator[bool]:
    on: bool = request.param
    if not on:
        await policies(world, False)
    try:
        yield on
    finally:
        await policies(world, True)


async def test_the_gateway_serves_as_the_runtime_role(world: World) -> None:
    async with pool(world).acquire() as conn:
        assert lane_floor.login_role(conn) == lane_floor.RUNTIME_ROLE
        assert not await conn.fetchval(
            "SELECT rolbypassrls FROM pg_roles WHERE rolname = current_user"
        )


async def test_every_table_holding_a_lane_has_the_policies_forced(world: World) -> None:
    """A table a later migration adds with a `lane` column is held to the floor too: the
    catalogue, not the migration's list, says which tables hold a lane's rows."""
    async with pool(world).acquire() as conn:
        rows = await conn.fetch(
            """SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
                      EXISTS (SELECT 1 FROM pg_policies p WHERE p.schemaname = 'public'
                              AND p.tablename = c.relname AND p.policyname = 'lanes') AS lanes
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
                 AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                             AND a.attname = 'lane' AND NOT a.attisdropped)"""
        )
    held = {r["relname"]: (r["relrowsecurity"], r["relforcerowsecurity"], r["lanes"]) for r in rows}
    assert set(held) == set(LANE_TABLES)
    assert all(flags == (True, True, True) for flags in held.values()), held


@pytest.mark.parametrize("switched", [True, False], ids=["policies", "no-policies"], indirect=True)
async def test_a_statement_naming_the_hidden_lane_finds_nothing(
    world: World, switched: bool
) -> None:
    found: dict[str, int] = {}
    async with pool(world).acquire() as conn:
        await conn.execute(lane_floor.begin("BEGIN", lane_floor.Lanes.of(["open"]), conn))
        try:
            for table in LANE_TABLES:
                found[table] = await conn.fetchval(
                    f"SELECT count(*) FROM {table} WHERE lane = 'hidden'"
                )
        finally:
            await conn.execute("ROLLBACK")
    if switched:
        assert found == dict.fromkeys(LANE_TABLES, 0)
    else:
        # The world holds the hidden lane in every table a read of it shows.
        held = {t for t, n in found.items() if n}
        assert {"records", "edge_properties", "audit_events", "edges", "corrections"} <= held
        assert {"record_words", "record_tags"} <= held


async def test_a_transaction_without_its_setting_sees_and_writes_nothing(world: World) -> None:
    async with pool(world).acquire() as conn:
        async with conn.transaction():
            for table in LANE_TABLES:
                # (A policy's events have no lane: they concern every reader.)
                lanes = f"SELECT count(*) FROM {table} WHERE lane IS NOT NULL"
                assert await conn.fetchval(lanes) == 0, table
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO record_tags (record_id, lane, tags) VALUES ('sr_x', 'open', '{}')"
                )
        # The setting of one statement ends with it: the next sees nothing again.
        statement = lane_floor.gated("SELECT count(*) AS n FROM records", 0)
        assert (await conn.fetchrow(statement, "open"))["n"] > 0
        assert await conn.fetchval("SELECT count(*) FROM records") == 0


async def test_a_read_whose_setting_is_lost_answers_empty(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot that skipped the setting answers an empty memory, never an error with data."""

    def ungated(statement: str, arguments: int) -> str:
        # The lanes are still passed, and set nowhere.
        return f"SELECT * FROM ({statement}) q WHERE ${arguments + 1}::text IS NOT NULL"

    monkeypatch.setattr(lane_floor, "settings_sql", lambda floor, role: "")
    monkeypatch.setattr(compiled_endpoint, "gated", ungated)
    for document in (
        "{ records(first: 50) { totalCount items { id } } }",
        '{ gather(match: ["org:Acme"]) { totalCount items { id } } }',
    ):
        body = await world.gateway.post(document, {}, world.tokens["curator"])
        assert "errors" not in body, body
        (answer,) = body["data"].values()
        assert answer["totalCount"] == 0 and answer["items"] == [], answer


def hidden_marks(world: World) -> list[str]:
    """What only the hidden lane holds: its records' ids, contents, labels and names."""
    ids = [v for k, v in world.ids.items() if k.startswith("h")]
    said = ["h1 content", "h2 content", "h3 content", "h1 changed", "h2 fixed", "#secret"]
    return ids + said + ["secret:s", '"secret"', "cabal", "secretpair", "Secret.md", "Secret alias"]


@pytest.mark.over10s("every query field the isolation walk knows, with and without the predicate")
@pytest.mark.parametrize("switched", [True, False], ids=["policies", "no-policies"], indirect=True)
async def test_every_read_without_the_lane_predicate_shows_nothing_hidden(
    world: World, switched: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the predicate a read may show more of the reader's own lanes (a lane it
    asked to leave out), never a mark of the hidden lane its intact answer lacks."""
    documents = [d for _, d in queries(world, 1)]
    marks = hidden_marks(world)
    intact = []
    for document in documents:
        intact.append(json.dumps(await world.gateway.post(document, {}, world.tokens["reader"])))
    # Every row's lane passes; the caller's lanes are still bound (typed), and tested by none.
    monkeypatch.setattr(Rule, "lane", lambda self, t, lanes: f"({lanes})::text[] IS NOT NULL")
    monkeypatch.setattr(Rule, "in_lane", lambda self, t, lane: f"({lane})::text IS NOT NULL")
    leaks = []
    for n, (document, want) in enumerate(zip(documents, intact, strict=True)):
        # A name of its own, so no statement built before the break is reused.
        seen = await world.gateway.post(f"query Broken{n} {document}", {}, world.tokens["reader"])
        got = json.dumps(seen)
        leaks += [(document, m) for m in marks if m in got and m not in want]
    assert len(documents) >= 60
    if switched:
        assert not leaks, leaks[:5]
    else:
        assert leaks, "without the policies the broken guard should show the hidden lane"
