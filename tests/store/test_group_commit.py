"""Group commit: new records arriving together share a transaction, never a fate."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import asyncpg

from policies.errors import PolicyError
from store.command import Current, Event, Locks, Plan, Txn, Write
from store.commands import Ingest, NewRecord
from store.group_commit import MAX_GROUP_WRITES
from store.records import Record
from store.verify import verify
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

    def decide(self, txn: Txn, current: Current) -> Plan[None]:
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
    async with sql(gateway.database_url) as conn:
        count = await conn.fetchval(
            "SELECT count(*) FROM edge_properties WHERE label || ':' || value = $1", tag
        )
    # the gone caller's record was decided with the others: written, not half-written
    assert count in (4, 5)


async def test_records_written_in_a_group_verify(gateway: Gateway) -> None:
    tag = f"tag:{unique()}"
    async with executor_on(gateway) as executor:
        await asyncio.gather(*(executor.execute("dev", one(f"n{n}", tag)) for n in range(8)))
    report = await verify(gateway.database_url)
    assert report.problems == []
    assert report.entries >= 8
