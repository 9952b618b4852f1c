"""The executor: lock order under contention, the runtime role, and verify under load."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from policies.properties import Property
from store.kinds.policy.in_force import PolicyCache
from store.kinds.record.locks import Records, RecordsRead
from store.kinds.record.model import Record, RecordState
from store.ledger.command import Applied, Current, Event, Head, Locks, Plan, Txn, Write
from store.ledger.executor import Executor
from store.operations.roles import RUNTIME_ROLE, runtime_url
from store.operations.verify import verify
from store.pool import Pool, create_pool, plain_url
from tests.conftest import GatewayFactory
from tests.gql._api import UPDATE, ingest
from tests.support import Gateway, sql


@dataclass(frozen=True)
class MarkBoth:
    """A command touching two records at once, as connect and group will."""

    first: str
    second: str
    mark: str

    def locks(self) -> Locks:
        return Records((self.first, self.second)).locks()

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[list[Record]]:
        writes = []
        for ident in (self.first, self.second):
            record = current.rows.record(ident)
            s = record.state
            state = RecordState(f"{s.content}|{self.mark}", s.lane, s.source_type, s.authority, ())
            writes.append(
                Write(
                    kind="record",
                    object_id=record.id,
                    event="sr_updated",
                    state=state.to_json(),
                    previous=Head(record.version, record.ledger_hash, record.updated_at),
                    # What an update of its content writes (verify recomputes it).
                    events=(Event("sr_updated", changed(s.properties)),),
                    lane=record.lane,
                    record_id=record.id,
                )
            )

        def result(applied: Applied) -> list[Record]:
            return [applied.records[w.object_id] for w in writes]

        return Plan(writes, result)


def changed(removed: Sequence[Property]) -> dict[str, Any]:
    return {"contentChanged": True, "added": [], "removed": [str(p) for p in removed]}


@contextlib.asynccontextmanager
async def executor_on(gateway: Gateway, **options: float) -> AsyncIterator[Executor]:
    pool: Pool = await create_pool(runtime_url(gateway.database_url), 8)
    try:
        yield Executor(pool, PolicyCache.empty(), **options)
    finally:
        await pool.close()


async def test_two_record_commands_in_opposite_orders_neither_deadlock_nor_lose_writes(
    gateway: Gateway,
) -> None:
    a = (await ingest(gateway, "a"))["id"]
    b = (await ingest(gateway, "b"))["id"]
    marks = [f"m{n}" for n in range(24)]
    async with executor_on(gateway) as executor:
        results = await asyncio.gather(
            *(
                executor.execute("dev", MarkBoth(a, b, m) if n % 2 else MarkBoth(b, a, m))
                for n, m in enumerate(marks)
            )
        )
    assert len(results) == len(marks)
    async with sql(gateway.database_url) as conn:
        rows = {
            r["id"]: r
            for r in await conn.fetch(
                "SELECT id, version, content FROM records WHERE id = ANY($1)", [a, b]
            )
        }
        versions = await conn.fetch(
            "SELECT object_id, array_agg(version ORDER BY version) AS v FROM ledger "
            "WHERE object_id = ANY($1) GROUP BY object_id",
            [a, b],
        )
    for rid in (a, b):
        assert rows[rid]["version"] == 1 + len(marks)
        assert sorted(rows[rid]["content"].split("|")[1:]) == sorted(marks)
    assert all(list(r["v"]) == list(range(1, 2 + len(marks))) for r in versions)


async def test_the_gateway_serves_as_a_role_that_cannot_undo_history(gateway: Gateway) -> None:
    record = await ingest(gateway, "kept", ["org:Acme"])
    async with sql(gateway.database_url) as admin:
        users = await admin.fetch(
            "SELECT DISTINCT usename FROM pg_stat_activity "
            "WHERE application_name = 'edgeloom' AND datname = current_database()"
        )
    assert [u["usename"] for u in users] == [RUNTIME_ROLE]
    conn = await asyncpg.connect(plain_url(runtime_url(gateway.database_url)))
    try:
        assert await conn.fetchval("SELECT current_user") == RUNTIME_ROLE
        for statement in (
            "ALTER TABLE ledger DISABLE TRIGGER ledger_append_only",
            "ALTER TABLE audit_events DISABLE TRIGGER ALL",
            "DELETE FROM ledger",
            "UPDATE ledger SET actor = 'mallory'",
            "TRUNCATE ledger",
            "DELETE FROM audit_events",
            "UPDATE audit_events SET actor = 'mallory'",
            "DELETE FROM checkpoints",
            "DROP TABLE ledger",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
    finally:
        await conn.close()
    async with sql(gateway.database_url) as admin:
        entries = await admin.fetchval(
            "SELECT count(*) FROM ledger WHERE object_id = $1", record["id"]
        )
    assert entries == 1


async def test_verify_reads_one_snapshot_while_writers_run(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(anonymous_agent="dev")
    seeds = [(await ingest(gateway, f"seed {n}", ["org:Acme"]))["id"] for n in range(4)]
    victim = (await ingest(gateway, "left alone by the writers"))["id"]
    stop = asyncio.Event()

    async def writer(rid: str) -> int:
        done = 0
        while not stop.is_set():
            await ingest(gateway, "more", ["org:Acme", f"n:{done}"])
            await gateway.data(UPDATE, {"id": rid, "content": f"v{done}"})
            done += 1
        return done

    writers = [asyncio.create_task(writer(rid)) for rid in seeds]
    try:
        reports = [await verify(gateway.database_url) for _ in range(20)]
        assert [r.problems for r in reports] == [[]] * 20
        assert reports[-1].entries > reports[0].entries  # the writers really ran meanwhile
        # Still catches real tampering under the same load.
        async with sql(gateway.database_url) as admin:
            await admin.execute("UPDATE records SET content = 'forged' WHERE id = $1", victim)
        caught = await verify(gateway.database_url)
        assert caught.problems == [f"{victim}: records.content differs from the ledger"]
    finally:
        stop.set()
        written = await asyncio.gather(*writers)
    assert all(n > 0 for n in written)
    # Put the projection back so the module's final verify holds.
    async with sql(gateway.database_url) as admin:
        await admin.execute(
            "UPDATE records r SET content = l.state->>'content' FROM ledger l "
            "WHERE r.id = $1 AND l.kind = 'record' AND l.object_id = r.id "
            "AND l.version = r.version",
            victim,
        )
