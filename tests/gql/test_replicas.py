"""Read replicas on a real primary and hot standby: reads go to the standby, a client reads
its own writes by the LSN its write answered, and a standby that lags or stops is skipped
with no error to the client."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from gql.server.settings import Settings
from store.reads.replicas import ReplicaOptions, parse_lsn
from tests.gql._api import INGEST, RECORD, UPDATE, unique
from tests.gql.test_metrics import scrape, value
from tests.gql.test_serve import serving
from tests.replica_pair import Pair, replica_pair
from tests.support import Databases, Gateway, free_port, run_gateway

LAG_BOUND = 1024 * 1024
# Not compiled (a fragment spread): strawberry answers it, over a snapshot.
RECORD_ORDINARY = "query($id: ID!) { record(id: $id) { ...r } } fragment r on Record { content }"


async def served(gateway: Gateway) -> tuple[float, float]:
    found = await scrape(gateway)
    return (
        value(found, "edgeloom_reads_total", target="primary"),
        value(found, "edgeloom_reads_total", target="standby"),
    )


async def post(gateway: Gateway, query: str, variables: dict[str, Any], **headers: str) -> Any:
    response = await gateway.client.post(
        gateway.graphql_url, json={"query": query, "variables": variables}, headers=headers
    )
    assert response.status_code == 200, response.text
    return response


async def read(gateway: Gateway, query: str, rid: str, lsn: str | None) -> str:
    """The content read, and where it was served (from the reads counter)."""
    headers = {"edgeloom-lsn": lsn} if lsn else {}
    before = await served(gateway)
    body = (await post(gateway, query, {"id": rid}, **headers)).json()
    assert "errors" not in body, body
    after = await served(gateway)
    content: str = body["data"]["record"]["content"]
    where = "standby" if after[1] > before[1] else "primary"
    assert after[0] + after[1] > before[0] + before[1]
    return f"{content}@{where}"


async def until(check: Callable[[], bool], seconds: float = 10.0) -> None:
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0.05)


def settings(pair: Pair) -> Settings:
    standby = pair.standby_url.replace("postgres@", "edgeloom_runtime@", 1)
    return Settings(
        database_url=pair.primary_url,
        anonymous_agent="dev",
        pool_size=2,
        read_pool_size=2,
        checkpoint_seconds=0,
        replicas=ReplicaOptions(
            urls=(standby,), max_lag_bytes=LAG_BOUND, lsn_wait=1.0, check_seconds=0.1
        ),
    )


@pytest.mark.over10s("a streaming standby made by pg_basebackup, started and stopped")
async def test_reads_follow_the_standby_and_fall_back_to_the_primary() -> None:
    with replica_pair() as pair:
        async with run_gateway(settings(pair)) as gateway:
            services = gateway.state["services"] if gateway.state else None
            assert services is not None and services.replicas is not None
            standby = services.replicas.standbys[0]
            await until(lambda: standby.up)

            # Read-your-writes: the write answers its LSN (body, header, cookie), and a
            # read carrying it sees the write, on the standby.
            content = unique("ryw-")
            written = await post(gateway, INGEST, {"input": {"content": content, "properties": []}})
            lsn = written.json()["extensions"]["lsn"]
            assert parse_lsn(lsn) is not None
            assert written.headers["edgeloom-lsn"] == lsn
            assert written.cookies["edgeloom_lsn"].strip('"') == lsn  # quoted: it holds a slash
            rid = written.json()["data"]["ingest"]["id"]
            assert await read(gateway, RECORD, rid, lsn) == f"{content}@standby"
            assert await read(gateway, RECORD_ORDINARY, rid, lsn) == f"{content}@standby"
            # The client keeps the cookie (httpx sends it back by itself).
            assert gateway.client.cookies["edgeloom_lsn"].strip('"') == lsn

            # The ordinary path's writes answer the LSN too.
            changed = unique("changed-")
            updated = await post(gateway, UPDATE, {"id": rid, "content": changed})
            lsn = updated.json()["extensions"]["lsn"]
            assert updated.headers["edgeloom-lsn"] == lsn
            assert await read(gateway, RECORD, rid, lsn) == f"{changed}@standby"

            # A lagging standby: replay paused, a write it has not replayed is read from
            # the primary; once it is past the lag bound, reads without an LSN are too.
            async with _sql(pair.standby_url) as conn:
                await conn.execute("SELECT pg_wal_replay_pause()")
            lagging = unique("lagging-")
            updated = await post(gateway, UPDATE, {"id": rid, "content": lagging})
            lsn = updated.json()["extensions"]["lsn"]
            assert await read(gateway, RECORD, rid, lsn) == f"{lagging}@primary"
            assert await read(gateway, RECORD_ORDINARY, rid, lsn) == f"{lagging}@primary"
            # The cookie alone does as well as the header.
            assert await read(gateway, RECORD, rid, None) == f"{lagging}@primary"
            # Without either, a standby within the bound answers, as of its replay.
            gateway.client.cookies.clear()
            assert await read(gateway, RECORD, rid, None) == f"{changed}@standby"
            async with _sql(pair.primary_url) as conn:
                # Two segments of WAL the standby does not replay: past the bound.
                await conn.execute("SELECT pg_switch_wal()")
                await conn.execute("CREATE TABLE filler (n int); DROP TABLE filler")
                await conn.execute("SELECT pg_switch_wal()")
            await until(lambda: not standby.up)
            assert await read(gateway, RECORD, rid, None) == f"{lagging}@primary"
            async with _sql(pair.standby_url) as conn:
                await conn.execute("SELECT pg_wal_replay_resume()")
            await until(lambda: standby.up)
            assert await read(gateway, RECORD, rid, None) == f"{lagging}@standby"
            assert value(await scrape(gateway), "edgeloom_standby_up", standby="standby-1") == 1

            # A stopped standby: the reads go on, from the primary, with no error.
            pair.stop_standby()
            for query in (RECORD, RECORD_ORDINARY, RECORD, RECORD_ORDINARY):
                assert await read(gateway, query, rid, None) == f"{lagging}@primary"
            assert not standby.up
            assert value(await scrape(gateway), "edgeloom_standby_up", standby="standby-1") == 0
            # Back up, it serves reads again.
            pair.start_standby()
            await until(lambda: standby.up)
            assert await read(gateway, RECORD, rid, None) == f"{lagging}@standby"


class _sql:
    """A superuser connection to one of the pair."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> asyncpg.Connection:
        self.conn: asyncpg.Connection = await asyncpg.connect(self.url)
        return self.conn

    async def __aexit__(self, *exc: object) -> None:
        await self.conn.close()


async def test_without_read_urls_no_lsn_is_reported(gateway: Gateway) -> None:
    written = await gateway.client.post(
        gateway.graphql_url,
        json={"query": INGEST, "variables": {"input": {"content": unique(), "properties": []}}},
    )
    assert "extensions" not in written.json()
    assert "edgeloom-lsn" not in written.headers
    assert isinstance(written, httpx.Response)


async def test_serve_takes_the_read_urls_and_starts_with_a_standby_down(
    databases: Databases, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EDGELOOM_READ_URLS reaches `edgeloom serve`; a standby that is not there at start
    neither stops the start nor fails a read: the primary answers."""
    database_url = await databases.create()
    monkeypatch.setenv("EDGELOOM_READ_URLS", f"postgresql://nobody@127.0.0.1:{free_port()}/x")
    async with serving(database_url, tmp_path) as served:
        content = unique("served-")
        written = await served.client.post(
            served.url,
            json={"query": INGEST, "variables": {"input": {"content": content, "properties": []}}},
        )
        lsn = written.json()["extensions"]["lsn"]
        rid = written.json()["data"]["ingest"]["id"]
        for headers in ({"edgeloom-lsn": lsn}, {}):
            body = (
                await served.client.post(
                    served.url, json={"query": RECORD, "variables": {"id": rid}}, headers=headers
                )
            ).json()
            assert body["data"]["record"]["content"] == content, body
        assert "reads on 1 standby(s) (EDGELOOM_READ_URLS)" in served.log.read_text()
