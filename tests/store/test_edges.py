"""The edge kind in the ledger: verify replays it and catches an edited entry, a moved
projection row or an edited event; the runtime role may move its projection only."""

from __future__ import annotations

from gql.server.settings import Settings
from store.operations.verify import verify
from tests.gql._api import ingest
from tests.gql._edges import RESOLVE, RETIRE, upsert
from tests.support import Databases, run_gateway, sql


async def test_verify_replays_edges_and_catches_what_was_edited(databases: Databases) -> None:
    url = await databases.create()
    async with run_gateway(Settings(database_url=url, anonymous_agent="dev", pool_size=2)) as g:
        a, b = (await ingest(g, "a"))["id"], (await ingest(g, "b"))["id"]
        edge = await upsert(g, fromId=a, toId=b, type="contradicts", weight=0.25)
        await upsert(g, fromId=a, toId=b, type="contradicts", evidence=[{"quote": "a"}])
        await g.data(RESOLVE, {"edgeId": edge["id"], "resolution": "MERGED", "resolver": "r"})
        await g.data(RETIRE, {"id": edge["id"]})
    report = await verify(url)
    assert report.ok, report.problems
    ident = edge["id"]
    async with sql(url) as conn:
        kinds = await conn.fetch(
            "SELECT version, event FROM ledger WHERE kind = 'edge' AND object_id = $1 "
            "ORDER BY version",
            ident,
        )
        assert [tuple(k) for k in kinds] == [
            (1, "edge_upserted"),
            (2, "edge_upserted"),
            (3, "conflict_resolved"),
            (4, "edge_retired"),
        ]
        # The projection moved by hand: verify names the edge.
        await conn.execute("UPDATE edges SET weight = 0.9 WHERE id = $1", ident)
    report = await verify(url)
    assert report.problems == [f"edge {ident}: differs from its ledger entries"]
    async with sql(url) as conn:
        await conn.execute("UPDATE edges SET weight = 0.25 WHERE id = $1", ident)
        # An event's payload edited: the entry implies another.
        await conn.execute("ALTER TABLE audit_events DISABLE TRIGGER ALL")
        await conn.execute(
            "UPDATE audit_events SET payload = jsonb_set(payload, '{resolution}', '\"REFUTED\"') "
            "WHERE object_id = $1 AND kind = 'conflict_resolved'",
            ident,
        )
        await conn.execute("ALTER TABLE audit_events ENABLE TRIGGER ALL")
    report = await verify(url)
    assert len(report.problems) == 1 and "payload field 'resolution'" in report.problems[0]
    async with sql(url) as conn:
        await conn.execute("ALTER TABLE audit_events DISABLE TRIGGER ALL")
        await conn.execute(
            "UPDATE audit_events SET payload = jsonb_set(payload, '{resolution}', '\"MERGED\"') "
            "WHERE object_id = $1 AND kind = 'conflict_resolved'",
            ident,
        )
        await conn.execute("ALTER TABLE audit_events ENABLE TRIGGER ALL")
        # The ledger entry edited: its hash no longer matches.
        await conn.execute("ALTER TABLE ledger DISABLE TRIGGER ledger_append_only")
        await conn.execute(
            "UPDATE ledger SET state = jsonb_set(state, '{weight}', '\"1.0\"') "
            "WHERE kind = 'edge' AND object_id = $1 AND version = 2",
            ident,
        )
    report = await verify(url)
    assert f"edge {ident} v2: hash does not match content" in report.problems


async def test_the_runtime_role_may_not_rewrite_edge_history(databases: Databases) -> None:
    url = await databases.create()
    async with run_gateway(Settings(database_url=url, anonymous_agent="dev", pool_size=2)):
        pass
    async with sql(url) as conn:
        grants = await conn.fetch(
            "SELECT privilege_type FROM information_schema.role_table_grants "
            "WHERE grantee = 'edgeloom_runtime' AND table_name = 'edges'"
        )
    assert {g["privilege_type"] for g in grants} == {"SELECT", "INSERT", "UPDATE"}
