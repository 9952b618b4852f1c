"""Two gateway processes on one database: a write on one reaches subscribers on the other."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

from store.database import create_engine
from store.feed.live import APPLICATION_NAME
from store.operations import tokens
from tests.gql._feed import feed_client
from tests.gql.test_serve import call, serving
from tests.support import Databases, no_request_id, sql

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


NOTE = 'mutation($c: String!) { ingest(input: {content: $c, lane: "notes"}) { id } }'


async def test_a_revoked_token_ends_its_subscriptions_on_every_replica_at_once(
    databases: Databases, tmp_path: Path
) -> None:
    """Revoking a token (the store function `edgeloom token revoke` runs) reaches the open
    subscriptions of every replica within about 100 ms: with writes going on all the time,
    no event committed 100 ms after the revoke returned reaches the token's subscribers,
    and their sockets close with 4403 soon after."""
    url = await databases.create()
    async with (
        serving(url, tmp_path, "--policy", "policies/examples/crm.yaml") as served_a,
        serving(url, tmp_path) as served_b,
    ):
        engine = create_engine(url, pool_size=1)
        try:
            revoked, secret = await tokens.create(engine, "planner")
            _, writer = await tokens.create(engine, "curator")
            async with sql(url) as conn:
                after = str(await conn.fetchval("SELECT coalesce(max(seq), 0) FROM audit_events"))
            sent: dict[str, float] = {}  # record id: when its write was sent
            writing = True

            async def write() -> None:
                for n in itertools.count():
                    if not writing:
                        return
                    served = (served_a, served_b)[n % 2]
                    at = time.monotonic()
                    body = await call(served.client, served.url, NOTE, writer, c=f"note {n}")
                    sent[body["data"]["ingest"]["id"]] = at  # type: ignore[index]

            ws_a = served_a.url.replace("http://", "ws://", 1)
            ws_b = served_b.url.replace("http://", "ws://", 1)
            async with feed_client(ws_a, secret) as on_a, feed_client(ws_b, secret) as on_b:
                clients = {"a": on_a, "b": on_b}
                closed_at: dict[str, float] = {}
                for op, client in clients.items():
                    await client.subscribe(op, after=after)
                    client.closed.add_done_callback(
                        lambda _, op=op: closed_at.setdefault(op, time.monotonic())
                    )
                writes = asyncio.create_task(write())
                try:
                    for op, client in clients.items():
                        await client.events(op, 3)  # both live, events flowing
                    await tokens.revoke(engine, revoked.id)
                    revoked_at = time.monotonic()
                    await asyncio.wait([on_a.closed, on_b.closed], timeout=3)
                    # Writes go on until some were sent well after the revoke: on a loaded
                    # machine a write takes long enough that a fixed pause may see too few.
                    deadline = time.monotonic() + 5
                    while time.monotonic() < deadline and (
                        sum(at > revoked_at + 0.1 for at in sent.values()) < 5
                    ):
                        await asyncio.sleep(0.05)
                finally:
                    writing = False
                    await writes
        finally:
            await engine.dispose()

    late = [rid for rid, at in sent.items() if at > revoked_at + 0.1]
    assert len(late) >= 5, "writes went on after the revocation"
    for op, client in clients.items():
        messages = []
        while not client.queues[op].empty():
            messages.append(client.queues[op].get_nowait())
        events = [m for m in messages if m["type"] == "next" and "errors" not in m["payload"]]
        delivered = [m["payload"]["data"]["auditEvents"]["recordId"] for m in events]
        too_late = [rid for rid in delivered if sent[rid] > revoked_at + 0.1]
        assert not too_late, f"{op}: {len(too_late)} events written after the revocation"
        ending = messages[len(events) :]
        assert [m["type"] for m in ending] == ["next", "complete"], ending
        [error] = ending[0]["payload"]["errors"]
        assert no_request_id(error)["extensions"] == {"code": "UNAUTHENTICATED"}
        assert client.closed.done(), f"{op}: the socket stayed open"
        assert client.closed.result()[0] == 4403, client.closed.result()
        assert closed_at[op] - revoked_at < 0.3, (op, closed_at[op] - revoked_at)
