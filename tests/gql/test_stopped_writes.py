"""A write whose request is stopped is either not written (and answered "stopped") or
answered with what happened to it: its result, or that its outcome is unknown."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import GatewayFactory
from tests.gql._api import INGEST, INGEST_MANY, UPDATE, ingest, unique
from tests.support import Gateway, no_request_id, sql

PATHS = pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "ordinary"])


def ingest_call(content: str, tag: str) -> dict[str, Any]:
    return {"query": INGEST, "variables": {"input": {"content": content, "properties": [tag]}}}


def ingest_many_call(contents: list[str], tag: str) -> dict[str, Any]:
    inputs = [{"content": c, "properties": [tag]} for c in contents]
    return {"query": INGEST_MANY, "variables": {"inputs": inputs}}


async def contents_tagged(gateway: Gateway, tag: str) -> list[str]:
    async with sql(gateway.database_url) as conn:
        rows = await conn.fetch(
            "SELECT r.content FROM records r JOIN edge_properties p ON p.record_id = r.id "
            "WHERE p.label || ':' || p.value = $1 ORDER BY r.content",
            tag,
        )
    return [r["content"] for r in rows]


async def lock_waiters(conn: asyncpg.Connection) -> int:
    """How many of the gateway's statements wait for a lock."""
    count: int = await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = 'edgeloom' AND state = 'active' AND wait_event_type = 'Lock'"
    )
    return count


async def until_waiting(conn: asyncpg.Connection, count: int) -> None:
    deadline = time.monotonic() + 10
    while await lock_waiters(conn) < count:
        assert time.monotonic() < deadline, "the writes never reached the lock"
        await asyncio.sleep(0.02)


@PATHS
async def test_writes_stopped_before_they_commit_are_answered_stopped_and_not_written(
    start_gateway: GatewayFactory, compiled: bool
) -> None:
    gateway = await start_gateway(
        anonymous_agent="dev", compiled_path=compiled, request_timeout=1.5
    )
    tag = f"t:{unique()}"
    before = await ingest(gateway, "before", [tag])  # the policy is read and cached now
    async with (
        sql(gateway.database_url) as holder,
        sql(gateway.database_url) as watcher,
        httpx.AsyncClient(timeout=20) as client,
    ):
        held = holder.transaction()
        await held.start()
        # The policy head held by another transaction: every write waits for its share lock.
        await holder.execute("SELECT version FROM policy_head WHERE id = 1 FOR UPDATE")
        # A client that leaves while its ingest waits in a group a writer holds.
        left = asyncio.create_task(client.post(gateway.graphql_url, json=ingest_call("left", tag)))
        await until_waiting(watcher, 1)
        left.cancel()
        with pytest.raises(asyncio.CancelledError):
            await left
        await asyncio.sleep(0.2)
        calls = [
            ingest_call("one", tag),  # held by the second writer
            ingest_many_call(["many 1", "many 2"], tag),  # queued
            ingest_call("queued", tag),  # queued
            # runs alone
            {"query": UPDATE, "variables": {"id": before["id"], "content": "updated"}},
        ]
        answers = await asyncio.gather(*(client.post(gateway.graphql_url, json=c) for c in calls))
        for answer in answers:
            assert answer.status_code == 503, answer.text
            [error] = answer.json()["errors"]
            assert error["extensions"]["completedWrites"] == 0
            assert "nothing it asked to write was written" in error["message"]
        await held.rollback()
    # The writers go on after the lock is released, and write none of them.
    assert (await ingest(gateway, "after", [tag]))["content"] == "after"
    assert await contents_tagged(gateway, tag) == ["after", "before"]


@PATHS
async def test_writes_committing_when_their_time_runs_out_are_answered_what_happened(
    start_gateway: GatewayFactory, compiled: bool
) -> None:
    gateway = await start_gateway(
        anonymous_agent="dev",
        compiled_path=compiled,
        request_timeout=1,
        write_outcome_timeout=1.5,
    )
    tag = f"t:{unique()}"
    await ingest(gateway, "before", [tag])
    async with (
        sql(gateway.database_url) as holder,
        sql(gateway.database_url) as watcher,
        httpx.AsyncClient(timeout=20) as client,
    ):
        # The ledger locked by another transaction: each group is decided (the policy
        # head is shared) and waits to append, inside the transaction that commits it.
        held = holder.transaction()
        await held.start()
        await holder.execute("LOCK TABLE ledger IN EXCLUSIVE MODE")
        sent = time.monotonic()
        calls = [ingest_call("one", tag), ingest_many_call(["many 1", "many 2"], tag)]
        answers = [asyncio.create_task(client.post(gateway.graphql_url, json=c)) for c in calls]
        await until_waiting(watcher, 1)  # one group, or two (one per writer)
        # Released after the request time, within the wait for the outcome.
        await asyncio.sleep(1.5 - (time.monotonic() - sent))
        await held.rollback()
        one, many = [(await a) for a in answers]
        assert one.status_code == 200, one.text
        assert one.json()["data"]["ingest"]["content"] == "one"
        assert [r["content"] for r in many.json()["data"]["ingestMany"]] == ["many 1", "many 2"]

        # Held past the wait for the outcome: the answer says the outcome is unknown.
        held = holder.transaction()
        await held.start()
        await holder.execute("LOCK TABLE ledger IN EXCLUSIVE MODE")
        calls = [ingest_call("two", tag), ingest_many_call(["many 3"], tag)]
        answers = await asyncio.gather(*(client.post(gateway.graphql_url, json=c) for c in calls))
        for answer in answers:
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert body["data"] is None
            [error] = body["errors"]
            assert no_request_id(error)["extensions"] == {
                "code": "OUTCOME_UNKNOWN",
                "waitedSeconds": 1.5,
            }
            assert "idempotencyKey" in error["message"] and "audit" in error["message"]
        await held.rollback()
    # Both were written once the ledger was free: answering "stopped" would have lied.
    assert (await ingest(gateway, "after", [tag]))["content"] == "after"
    assert await contents_tagged(gateway, tag) == [
        "after",
        "before",
        "many 1",
        "many 2",
        "many 3",
        "one",
        "two",
    ]


@pytest.fixture(scope="module")
async def hasty(start_gateway: GatewayFactory) -> Gateway:
    """A development gateway whose requests may run one second."""
    return await start_gateway(anonymous_agent="dev", request_timeout=1)


async def test_a_request_stopped_after_one_of_its_writes_says_so(hasty: Gateway) -> None:
    gateway = hasty
    tag = f"t:{unique()}"
    locked = await ingest(gateway, "locked", [tag])
    both = """
    mutation($input: IngestInput!, $id: ID!) {
      first: ingest(input: $input) { id }
      second: update(id: $id, content: "updated") { id }
    }
    """
    variables = {"input": {"content": "first", "properties": [tag]}, "id": locked["id"]}
    async with sql(gateway.database_url) as holder:
        held = holder.transaction()
        await held.start()
        # The second write waits for a record another transaction holds, past the time.
        await holder.execute("SELECT id FROM records WHERE id = $1 FOR UPDATE", locked["id"])
        answer = await gateway.client.post(
            gateway.graphql_url, json={"query": both, "variables": variables}
        )
        await held.rollback()
    assert answer.status_code == 503, answer.text
    [error] = answer.json()["errors"]
    assert error["extensions"]["completedWrites"] == 1
    assert "1 of its writes had been made before it stopped" in error["message"]
    assert await contents_tagged(gateway, tag) == ["first", "locked"]


@PATHS
async def test_a_request_waiting_for_a_connection_is_answered_when_its_time_is_up(
    hasty: Gateway, compiled: bool
) -> None:
    query = "{ records(first: 1) { totalCount } }" if compiled else "{ labels { label } }"
    services = hasty.state["services"] if hasty.state else None
    assert services is not None
    held = [await services.pool.acquire() for _ in range(services.pool.get_max_size())]
    try:
        # Deciding who calls needs the policy (read again past its cache's second), and
        # answering needs a connection: every one is held elsewhere, so the request waits,
        # within its time, and is answered when that is up.
        for stale in (True, False):
            if stale:
                services.policies.checked_at = 0.0
            answer = await asyncio.wait_for(
                hasty.client.post(hasty.graphql_url, json={"query": query}), 5
            )
            assert answer.status_code == 503, answer.text
            [error] = answer.json()["errors"]
            assert error["extensions"]["timeoutSeconds"] == 1
            assert "nothing it asked to write was written" in error["message"]
    finally:
        for conn in held:
            await services.pool.release(conn)
    assert (await hasty.data(query)) is not None
