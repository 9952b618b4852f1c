"""Group commit: new records arriving together share a transaction, never a fate."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from policies.errors import PolicyError
from store.errors import OutcomeUnknownError, StoppedError
from store.kinds.record.commands import Ingest, NewRecord
from store.kinds.record.model import Record
from store.ledger.command import Current, Event, Locks, Plan, Txn, Write
from store.ledger.group_commit import MAX_GROUP_WRITES
from store.operations.verify import verify
from tests.gql._api import unique
from tests.store.test_executor import executor_on
from tests.support import Gateway, sql


@dataclass(frozen=True)
class Clash:
    """A command that locks nothing and writes version 1 of a record that exists: the
    database refuses its append (the ledger's primary key)."""

    record_id: str

    def locks(self) -> Locks:
        return Locks()

    def decide(self, txn: Txn, current: Current[Any]) -> Plan[None]:
        write = Write(
            kind="record",
            object_id=self.record_id,
            event="sr_ingested",
            state={
                "content": "again",
                "lane": "default",
                "source_type": "note",
                "authority": "agent",
                "properties": [],
            },
            previous=None,
            events=(Event("sr_ingested", {}),),
            lane="default",
            record_id=self.record_id,
        )
        return Plan([write], lambda applied: None)


def one(content: str, tag: str, lane: str | None = None) -> Ingest:
    return Ingest((NewRecord(content, (tag,), lane=lane),))


async def transactions_of(gateway: Gateway, ids: list[str]) -> dict[str, int]:
    async with sql(gateway.database_url) as conn:
        rows = await conn.fetch(
            "SELECT record_id, txid::text::bigint AS txid FROM audit_events "
            "WHERE record_id = ANY($1)",
            ids,
        )
    return {r["record_id"]: r["txid"] for r in rows}


async def test_new_records_sent_together_commit_together_and_a_refusal_stays_its_own(
    gateway: Gateway,
) -> None:
    tag = f"tag:{unique()}"
    async with executor_on(gateway) as executor:
        results = await asyncio.gather(
            *(executor.execute("dev", one(f"note {n}", tag)) for n in range(6)),
            executor.execute("dev", one("elsewhere", tag, lane="nowhere")),
            return_exceptions=True,
        )
    *written, refused = results
    assert isinstance(refused, PolicyError), refused
    assert "default" in str(refused)  # the refusal names what is allowed
    records = [r[0] for r in written if isinstance(r, list)]
    assert [r.state.content for r in records] == [f"note {n}" for n in range(6)]
    # one transaction for all six: one commit, and all six are in it
    txids = await transactions_of(gateway, [r.id for r in records])
    assert len(txids) == 6 and len(set(txids.values())) == 1


async def test_when_the_database_refuses_a_group_each_command_runs_on_its_own(
    gateway: Gateway,
) -> None:
    tag = f"tag:{unique()}"
    async with executor_on(gateway) as executor:
        [existing] = await executor.execute("dev", one("first", tag))
        results = await asyncio.gather(
            *(executor.execute("dev", one(f"note {n}", tag)) for n in range(4)),
            executor.execute("dev", Clash(existing.id)),
            return_exceptions=True,
        )
    *written, clash = results
    assert isinstance(clash, asyncpg.UniqueViolationError), clash
    records = [r[0] for r in written if isinstance(r, list)]
    assert len(records) == 4
    # written again one by one: a transaction each, and the existing record untouched
    txids = await transactions_of(gateway, [r.id for r in records])
    assert len(set(txids.values())) == 4
    async with sql(gateway.database_url) as conn:
        assert await conn.fetchval("SELECT content FROM records WHERE id = $1", existing.id) == (
            "first"
        )


async def test_a_group_stops_at_its_size_and_the_rest_follow_in_the_next(
    gateway: Gateway,
) -> None:
    tag = f"tag:{unique()}"
    per_call = 500
    calls = MAX_GROUP_WRITES // per_call + 1
    async with executor_on(gateway) as executor:
        results: list[list[Record]] = await asyncio.gather(
            *(
                executor.execute(
                    "dev",
                    Ingest(tuple(NewRecord(f"{c}.{n}", (tag,)) for n in range(per_call))),
                )
                for c in range(calls)
            )
        )
    assert [len(r) for r in results] == [per_call] * calls
    txids = await transactions_of(gateway, [r[0].id for r in results])
    by_call = [txids[r[0].id] for r in results]
    # the first calls fill one group; the last goes in the next transaction
    assert len(set(by_call[:-1])) == 1
    assert by_call[-1] != by_call[0]


async def test_a_caller_that_goes_away_does_not_stop_the_others(gateway: Gateway) -> None:
    tag = f"tag:{unique()}"
    async with executor_on(gateway) as executor:
        tasks = [asyncio.create_task(executor.execute("dev", one(f"n{n}", tag))) for n in range(5)]
        await asyncio.sleep(0)  # every call is queued
        tasks[2].cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(done[2], asyncio.CancelledError)
    assert [d[0].state.content for i, d in enumerate(done) if i != 2] == ["n0", "n1", "n3", "n4"]
    # the gone caller's command was still queued: taken out, not written
    assert await contents_tagged(gateway, tag) == ["n0", "n1", "n3", "n4"]


async def contents_tagged(gateway: Gateway, tag: str) -> list[str]:
    async with sql(gateway.database_url) as conn:
        rows = await conn.fetch(
            "SELECT r.content FROM records r JOIN edge_properties p ON p.record_id = r.id "
            "WHERE p.label || ':' || p.value = $1 ORDER BY r.content",
            tag,
        )
    return [r["content"] for r in rows]


async def wait_for_backend(conn: asyncpg.Connection, condition: str) -> None:
    """Until one of the executor's connections is in pg_stat_activity on `condition`."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        f"AND application_name = 'edgeloom' AND state = 'active' AND {condition}"
    )
    async with asyncio.timeout(10):
        while not await conn.fetchval(query):
            await asyncio.sleep(0.01)


async def test_callers_cancelled_before_their_commands_are_decided_write_nothing(
    gateway: Gateway,
) -> None:
    tag = f"tag:{unique()}"
    async with (
        executor_on(gateway) as executor,
        sql(gateway.database_url) as holder,
        sql(gateway.database_url) as watcher,
    ):
        await executor.execute("dev", one("before", tag))  # the policy is cached now
        # The policy head held by another transaction: a writer holds each of the first
        # two calls in a group waiting for its share lock; the third waits in the queue.
        async with holder.transaction():
            await holder.execute("SELECT version FROM policy_head WHERE id = 1 FOR UPDATE")
            tasks = []
            for n in range(3):
                tasks.append(asyncio.create_task(executor.execute("dev", one(f"n{n}", tag))))
                await asyncio.sleep(0.05)
            await wait_for_backend(watcher, "wait_event_type = 'Lock'")
            for task in tasks:
                task.cancel()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            assert all(isinstance(d, asyncio.CancelledError) for d in done), done
        # Released: the writers go on, and write none of the three.
        [after] = await asyncio.wait_for(executor.execute("dev", one("after", tag)), 5)
    assert after.state.content == "after"
    assert await contents_tagged(gateway, tag) == ["after", "before"]


@pytest.fixture(scope="module")
async def slow_commits(gateway: Gateway) -> Gateway:
    """The gateway's database, where a record whose content is 'slow <seconds>' makes
    its transaction's COMMIT take that long (a deferred constraint trigger)."""
    async with sql(gateway.database_url) as conn:
        await conn.execute(
            """
            CREATE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF NEW.content LIKE 'slow %' THEN
                PERFORM pg_sleep(split_part(NEW.content, ' ', 2)::float);
              END IF;
              RETURN NULL;
            END $$;
            CREATE CONSTRAINT TRIGGER test_slow_commit AFTER INSERT ON records
              DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_slow_commit();
            """
        )
    return gateway


def slow(seconds: float, tag: str, key: str | None) -> Ingest:
    return Ingest((NewRecord(f"slow {seconds}", (tag,), idempotency_key=key),))


# Without an idempotency key an ingest is group-committed; with one it runs alone.
GROUPED_OR_ALONE = pytest.mark.parametrize("keyed", [False, True], ids=["grouped", "alone"])


@GROUPED_OR_ALONE
async def test_a_caller_cancelled_during_its_commit_gets_the_result(
    slow_commits: Gateway, keyed: bool
) -> None:
    tag = f"tag:{unique()}"
    key = unique() if keyed else None
    async with executor_on(slow_commits) as executor, sql(slow_commits.database_url) as watcher:
        call = asyncio.create_task(executor.execute("dev", slow(1, tag, key)))
        await wait_for_backend(watcher, "wait_event = 'PgSleep'")  # inside its COMMIT
        call.cancel()
        [record] = await call  # not CancelledError: it was written
    assert record.state.content == "slow 1"
    assert await contents_tagged(slow_commits, tag) == ["slow 1"]


@GROUPED_OR_ALONE
async def test_a_commit_outcome_that_does_not_come_in_time_is_unknown_not_stopped(
    slow_commits: Gateway, keyed: bool
) -> None:
    tag = f"tag:{unique()}"
    key = unique() if keyed else None
    options = {"outcome_timeout": 0.3}
    async with executor_on(slow_commits, **options) as executor:
        async with sql(slow_commits.database_url) as watcher:
            call = asyncio.create_task(executor.execute("dev", slow(1.5, tag, key)))
            await wait_for_backend(watcher, "wait_event = 'PgSleep'")
            call.cancel()
            with pytest.raises(OutcomeUnknownError) as unknown:
                await call
        assert unknown.value.code == "OUTCOME_UNKNOWN"
        assert "idempotencyKey" in unknown.value.message and "audit" in unknown.value.message
        await asyncio.sleep(2)
    # It was written after all: which is why it could not be answered "stopped".
    assert await contents_tagged(slow_commits, tag) == ["slow 1.5"]


async def test_a_task_whose_cancellation_answered_a_commit_begins_no_other_write(
    slow_commits: Gateway,
) -> None:
    tag = f"tag:{unique()}"
    async with executor_on(slow_commits) as executor, sql(slow_commits.database_url) as watcher:

        async def two_writes() -> None:
            await executor.execute("dev", slow(1, tag, None))
            await executor.execute("dev", one("second", tag))

        call = asyncio.create_task(two_writes())
        await wait_for_backend(watcher, "wait_event = 'PgSleep'")
        call.cancel()
        with pytest.raises(StoppedError):
            await call
    assert await contents_tagged(slow_commits, tag) == ["slow 1"]


async def test_records_written_in_a_group_verify(gateway: Gateway) -> None:
    tag = f"tag:{unique()}"
    async with executor_on(gateway) as executor:
        await asyncio.gather(*(executor.execute("dev", one(f"n{n}", tag)) for n in range(8)))
    report = await verify(gateway.database_url)
    assert report.problems == []
    assert report.entries >= 8
