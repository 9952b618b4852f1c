"""Two gateway processes on one database: a write on one reaches subscribers on the other."""

from __future__ import annotations

from pathlib import Path

from store.feed import APPLICATION_NAME
from tests.gql._feed import feed_client
from tests.gql.test_serve import serving
from tests.support import Databases, sql

INGEST = "mutation($c: String!) { ingest(input: {content: $c}) { id } }"


async def test_replicas_share_one_feed_and_survive_a_lost_connection(
    databases: Databases, tmp_path: Path
) -> None:
    url = await databases.create()
    async with (
        serving(url, tmp_path) as served_a,
        serving(url, tmp_path) as served_b,
    ):
        client_a, graphql_a, graphql_b = served_a.client, served_a.url, served_b.url

        async def ingest(content: str) -> str:
            body = (
                await client_a.post(graphql_a, json={"query": INGEST, "variables": {"c": content}})
            ).json()
            record_id: str = body["data"]["ingest"]["id"]
            return record_id

        ws_a = graphql_a.replace("http://", "ws://", 1)
        ws_b = graphql_b.replace("http://", "ws://", 1)
        async with feed_client(ws_a) as on_a, feed_client(ws_b) as on_b:
            await on_a.subscribe("a", after="0")
            await on_b.subscribe("b", after="0")
            # both start with the development policy that replica A applied
            assert (await on_a.event("a"))["kind"] == "policy_applied"
            assert (await on_b.event("b"))["kind"] == "policy_applied"
            first = await ingest("written on A")
            assert (await on_b.event("b"))["recordId"] == first
            assert (await on_a.event("a"))["recordId"] == first

            # Cut both readers' connections (as a PostgreSQL restart would).
            async with sql(url) as conn:
                killed = await conn.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = $1 AND datname = current_database()",
                    APPLICATION_NAME,
                )
            assert killed == 2
            during = [await ingest(f"while reconnecting {n}") for n in range(3)]
            got_b = await on_b.events("b", 3)
            got_a = await on_a.events("a", 3)
            assert [e["recordId"] for e in got_b] == during
            assert [e["recordId"] for e in got_a] == during
            await on_b.nothing("b", 0.3)
            async with sql(url) as conn:
                readers = await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE application_name = $1 AND datname = current_database()",
                    APPLICATION_NAME,
                )
            assert readers == 2, "each replica reconnected with one feed connection"
