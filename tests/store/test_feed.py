"""The feed reader on a real PostgreSQL: visibility, ordering, exactly-once, reconnects."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import asyncpg
import pytest

from store.feed.live import APPLICATION_NAME, FeedEvent, FeedReader, Orderer, Snapshot, widen_xid
from store.feed.polls import SNAPSHOT, UNSEEN, poll_statement
from store.ledger.audit import AuditEvent
from tests.support import Databases, plain, plan_nodes, sql

POLL = poll_statement(500)

TIMEOUT = 10.0


def event(seq: int, txid: int = 1) -> FeedEvent:
    return FeedEvent(
        AuditEvent(
            seq=seq,
            id=f"ev_{seq}",
            kind="sr_ingested",
            record_id=None,
            lane="default",
            actor="dev",
            at=datetime.now(UTC),
            payload={},
            version_before=None,
            version_after=1,
        ),
        txid,
    )


def seqs(events: Sequence[FeedEvent]) -> list[int]:
    return [e.seq for e in events]


def running(*txids: int, xmax: int = 10, late: frozenset[int] = frozenset()) -> Snapshot:
    """A snapshot in which `txids` (below xmax) and `late` (at or above it) run."""
    return Snapshot(min(txids, default=xmax), xmax, frozenset(txids), late)


def test_the_orderer_releases_a_contiguous_run_at_once() -> None:
    orderer = Orderer(released_upto=10, order_wait=1.0)
    assert seqs(orderer.release([event(12), event(11), event(13)], running(), 0.0)) == [
        11,
        12,
        13,
    ]


def test_the_orderer_waits_for_a_running_transaction_to_fill_a_gap() -> None:
    orderer = Orderer(released_upto=10, order_wait=1.0)
    # 11 is missing while transaction 7 runs: 12 waits for it.
    assert orderer.release([event(12)], running(7), 0.0) == []
    assert orderer.release([], running(7, 8), 0.5) == []
    # transaction 7 commits with seq 11: both go out, in order
    assert seqs(orderer.release([event(11)], running(8), 0.6)) == [11, 12]


def test_the_orderer_passes_a_gap_once_its_transactions_are_over() -> None:
    orderer = Orderer(released_upto=10, order_wait=1.0)
    assert orderer.release([event(12)], running(7), 0.0) == []
    # 7 rolled back (it is no longer running and nothing came): 11 never will.
    assert seqs(orderer.release([], running(9), 0.1)) == [12]


def test_the_orderer_passes_a_gap_with_no_running_transaction_at_once() -> None:
    orderer = Orderer(released_upto=10, order_wait=1.0)
    assert seqs(orderer.release([event(12)], running(), 0.0)) == [12]


def test_the_orderer_waits_at_most_order_wait_then_delivers_late() -> None:
    orderer = Orderer(released_upto=10, order_wait=1.0)
    assert orderer.release([event(12)], running(7), 0.0) == []
    assert orderer.release([event(13)], running(7), 0.9) == []
    assert seqs(orderer.release([], running(7), 1.0)) == [12, 13]
    # 11 commits at last: it is delivered, late, rather than lost
    assert seqs(orderer.release([event(11), event(14)], running(), 1.5)) == [11, 14]


def test_the_orderer_waits_for_a_transaction_that_took_its_id_after_xmax() -> None:
    # 12 (transaction 9) committed, so xmax is 10; transaction 10 took its id after
    # 9 did but its seq (11) before 9's, and runs still: PostgreSQL's snapshot does
    # not list it, the reader does.
    orderer = Orderer(released_upto=10, order_wait=1.0)
    assert orderer.release([event(12)], running(late=frozenset({10})), 0.0) == []
    # 10 is over once a snapshot's xmax is past it and it is not listed as running
    assert orderer.release([], running(xmax=10, late=frozenset({10})), 0.1) == []
    assert seqs(orderer.release([event(11)], running(xmax=11), 0.2)) == [11, 12]


def test_a_32_bit_transaction_id_is_widened_against_xmax() -> None:
    epoch = 3 << 32
    assert widen_xid(5, epoch + 3) == epoch + 5  # just ahead
    assert widen_xid(2, epoch + 3) == epoch + 2  # behind
    assert widen_xid((1 << 32) - 2, epoch + 3) == epoch - 2  # behind, across the wrap
    assert widen_xid(1, epoch - 2) == epoch + 1  # ahead, across the wrap


def test_a_snapshot_knows_what_it_saw() -> None:
    snapshot = Snapshot.parse("100:105:101,103")
    assert snapshot == Snapshot(100, 105, frozenset({101, 103}))
    assert snapshot.as_text() == "100:105:101,103"
    assert [snapshot.finished(x) for x in (99, 100, 101, 102, 103, 104, 105)] == [
        True,
        True,
        False,
        True,
        False,
        True,
        False,
    ]


# -- the reader on a real database ------------------------------------------


@pytest.fixture(scope="module")
async def database(databases: Databases) -> str:
    """One database for the module (each database dropped costs a checkpoint)."""
    return await databases.create()


INSERT = """
INSERT INTO audit_events (id, kind, record_id, lane, actor, at, payload,
                          version_before, version_after, object_kind, object_id)
VALUES ($1, 'sr_ingested', NULL, 'default', 'test', now(), '{}'::jsonb, NULL, 1, 'record', 'x')
RETURNING seq
"""


async def insert(conn: asyncpg.Connection) -> int:
    seq: int = await conn.fetchval(INSERT, "ev_" + uuid.uuid4().hex)
    return seq


async def feed_connections(conn: asyncpg.Connection, expected: int) -> int:
    """The feed connections on this database, once they number `expected` (or after 5 s):
    a closed connection's backend leaves pg_stat_activity a moment later."""
    for _ in range(50):
        count: int = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = $1 AND datname = current_database()",
            APPLICATION_NAME,
        )
        if count == expected:
            break
        await asyncio.sleep(0.1)
    return count


class Collected:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[FeedEvent] = asyncio.Queue()

    def __call__(self, events: Sequence[FeedEvent]) -> None:
        for e in events:
            self.queue.put_nowait(e)

    async def take(self, count: int) -> list[int]:
        return [(await asyncio.wait_for(self.queue.get(), TIMEOUT)).seq for _ in range(count)]

    async def nothing(self, seconds: float) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(self.queue.get(), seconds)


@pytest.fixture
async def reader(database: str) -> AsyncIterator[tuple[FeedReader, Collected]]:
    collected = Collected()
    # A gap waits this long at most for its transaction: far longer than any commit here
    # takes, even on a loaded CI machine, so order is never given up for time.
    feed = FeedReader(database, collected, lambda: True, poll_interval=0.02, order_wait=5.0)
    task = asyncio.create_task(feed.run())
    feed.wake()
    assert await feed.live(TIMEOUT)
    try:
        yield feed, collected
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_out_of_order_commits_are_delivered_once_in_seq_order(
    database: str, reader: tuple[FeedReader, Collected]
) -> None:
    _, collected = reader
    a = await asyncpg.connect(plain(database))
    b = await asyncpg.connect(plain(database))
    try:
        async with a.transaction():
            await a.execute("SELECT pg_current_xact_id()")  # A has its xid first
            seq_a = await insert(a)
            async with b.transaction():
                seq_b = await insert(b)
            # B is committed, A is not: B is held back behind A's seq.
            await collected.nothing(0.2)
        assert await collected.take(2) == [seq_a, seq_b]
        # A takes its transaction id after B but its seq before B's, and B commits:
        # A's id is above the snapshot's xmax, so PostgreSQL does not list it as
        # running; B is still held back behind it.
        await b.execute("BEGIN; SELECT pg_current_xact_id()")
        async with a.transaction():
            await a.execute("SELECT pg_current_xact_id()")
            seq_a = await insert(a)
            seq_b = await insert(b)
            await b.execute("COMMIT")
            await collected.nothing(0.2)
        assert await collected.take(2) == [seq_a, seq_b]
        # and many concurrent ones: each exactly once, in seq order
        conns = [await asyncpg.connect(plain(database)) for _ in range(5)]
        try:

            async def write(conn: asyncpg.Connection) -> list[int]:
                out = []
                for _ in range(20):
                    async with conn.transaction():
                        await conn.execute("SELECT pg_current_xact_id()")
                        out.append(await insert(conn))
                return out

            written = sorted(sum(await asyncio.gather(*(write(c) for c in conns)), []))
        finally:
            for conn in conns:
                await conn.close()
        assert await collected.take(100) == written
        await collected.nothing(0.2)
    finally:
        await a.close()
        await b.close()


async def test_the_reader_reconnects_and_catches_up_from_the_table(
    database: str, reader: tuple[FeedReader, Collected]
) -> None:
    feed, collected = reader
    async with sql(database) as conn:
        first = await insert(conn)
        assert await collected.take(1) == [first]
        assert await feed_connections(conn, 1) == 1  # the last test's reader has gone
        killed = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1 AND datname = current_database()",
            APPLICATION_NAME,
        )
        assert killed == 1
        # Written while the reader has no connection.
        during = [await insert(conn) for _ in range(5)]
        assert await collected.take(5) == during
        after = await insert(conn)
        assert await collected.take(1) == [after]
        await collected.nothing(0.2)
        assert feed.reconnects >= 1
        # one dedicated connection again, under its own name
        assert await feed_connections(conn, 1) == 1


async def test_the_reader_polls_only_while_wanted(database: str) -> None:
    collected = Collected()
    wanted = False
    feed = FeedReader(database, collected, lambda: wanted, poll_interval=0.02)
    task = asyncio.create_task(feed.run())
    try:
        assert not await feed.live(0.2)  # no one asked: no connection, no polling
        async with sql(database) as conn:
            assert await feed_connections(conn, 0) == 0
            await insert(conn)
            wanted = True
            feed.wake()
            assert await feed.live(TIMEOUT)
            # Starts from the present: the earlier event is not replayed.
            later = await insert(conn)
            assert await collected.take(1) == [later]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def audit_scans(plan: object) -> list[dict[str, object]]:
    """Every plan node that reads audit_events."""
    return [
        node
        for node in plan_nodes(plan)
        if node.get("Relation Name") == "audit_events"
        or "audit_events" in str(node.get("Index Name", ""))
    ]


async def test_a_read_costs_what_it_returns_however_long_the_feed(databases: Databases) -> None:
    url = await databases.create()
    async with sql(url) as conn:
        # A long feed, no statistics gathered yet: the planner knows nothing of txid.
        for _ in range(20):
            async with conn.transaction():
                await conn.executemany(
                    INSERT.replace("RETURNING seq", ""),
                    [("ev_" + uuid.uuid4().hex,) for _ in range(250)],
                )
        snapshot = Snapshot.from_row(await conn.fetchrow(SNAPSHOT))
        newest = await insert(conn)
        # The poll runs under its generic plan (see poll_statement), a catch-up under a
        # custom one.
        for statement, args, plans in (
            (POLL, (str(snapshot.xmax), []), "force_generic_plan"),
            (UNSEEN, (str(snapshot.xmax), []), "auto"),
        ):
            await conn.execute(f"SET plan_cache_mode = {plans}")
            [row] = await conn.fetch(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", *args)
            plan = json.loads(row[0])
            scans = audit_scans(plan)
            assert scans, plan
            # Through the txid index, never walking (or filtering) the 5,000 events before.
            assert all("pk_audit_events" not in str(s.get("Index Name")) for s in scans), plan
            assert all(s["Node Type"] != "Seq Scan" for s in scans), plan
            assert sum(int(str(s.get("Rows Removed by Filter", 0))) for s in scans) == 0
        rows = await conn.fetch(POLL, str(snapshot.xmax), [])
        assert [r["seq"] for r in rows] == [newest]


async def test_the_reader_plans_its_poll_once(databases: Databases) -> None:
    url = await databases.create()
    reader = FeedReader(url, lambda events: None, lambda: True)
    conn = await reader._connect()
    try:
        for _ in range(8):
            await conn.fetch(POLL, "1", [])
        [plans] = await conn.fetch(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
            POLL,
        )
        assert plans["custom_plans"] == 0, dict(plans)
        assert plans["generic_plans"] >= 8, dict(plans)
    finally:
        await conn.close()


NAMING = """
INSERT INTO audit_events (id, kind, record_id, lane, actor, at, payload,
                          version_before, version_after, object_kind, object_id)
VALUES ($1, $2, $3, $4, 'test', now(), $5::jsonb, 1, 2, 'record', $3)
RETURNING seq
"""
RECORD = """
INSERT INTO records (id, lane, source_type, authority, content, properties, version,
                     created_at, updated_at, created_by, ledger_hash)
VALUES ($1, $2, 'conversational', 'conversational', '', '[]'::jsonb, 1, now(), now(), 't', '')
"""


@pytest.mark.parametrize("fetch_size", [500, 2], ids=["one-poll", "streamed"])
async def test_the_reader_reads_the_lanes_of_what_payloads_name(
    database: str, fetch_size: int
) -> None:
    """Each event comes with the lanes of the records its payload names and of the members
    it counts, read by the reader itself (polled, or streamed in a catch-up)."""
    collected = Collected()
    feed = FeedReader(database, collected, lambda: True, poll_interval=0.02, fetch_size=fetch_size)
    task = asyncio.create_task(feed.run())
    feed.wake()
    try:
        assert await feed.live(TIMEOUT)
        mine, theirs = "sr_" + uuid.uuid4().hex, "sr_" + uuid.uuid4().hex
        value = "team_" + uuid.uuid4().hex
        group = json.dumps({"property": f"e_group:{value}", "value": value, "members": 2})
        async with sql(database) as conn:
            await conn.execute(RECORD, mine, "notes")
            await conn.execute(RECORD, theirs, "private")
            async with conn.transaction():
                connected = json.dumps({"other": theirs})
                seq = await conn.fetchval(
                    NAMING, "ev_" + uuid.uuid4().hex, "connected", mine, "notes", connected
                )
                for rid, lane in ((mine, "notes"), (theirs, "private")):
                    await conn.fetchval(
                        NAMING, "ev_" + uuid.uuid4().hex, "grouped", rid, lane, group
                    )
        events = [await asyncio.wait_for(collected.queue.get(), TIMEOUT) for _ in range(3)]
        assert [e.seq for e in events] == [seq, seq + 1, seq + 2]
        assert events[0].named.lanes == {theirs: "private"}
        for counting in events[1:]:
            assert sorted(counting.named.members[counting.seq]) == ["notes", "private"]
        assert events[0].for_reader(frozenset({"notes"})).event.payload == {}
        assert events[1].for_reader(frozenset({"notes"})).event.payload["members"] == 1
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
