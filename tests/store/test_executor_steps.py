"""Steps of one transaction (`Plan.then`): a later step sees what the earlier wrote, all
are written or none, and a later step locks only what the first locked or the
transaction wrote, alone or in a group commit."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from store.errors import InvalidInputError, RetiredRecordError
from store.intake.together import Together, Written
from store.kinds.edge.commands import UpsertEdge
from store.kinds.record.commands import Ingest, NewRecord
from store.kinds.record.locks import Records
from store.kinds.record.model import Record
from store.kinds.record.retire import RetireRecord, RetireRecords
from store.ledger.command import Command, Locks
from store.ledger.locks import StepError
from tests.gql._api import ingest
from tests.store.test_executor import executor_on
from tests.support import Gateway, sql


def made(results: Sequence[Any]) -> list[str]:
    """The ids of the records the first step's Ingest made."""
    [records] = results[:1]
    return [r.id for r in records if isinstance(r, Record)]


def linking(to: str | None = None, itself: bool = False) -> Any:
    """A later step: an edge between the two new records, and one from the first to `to`."""

    def step(results: Sequence[Any]) -> Sequence[Command[Any]]:
        a, b = made(results)
        commands: list[Command[Any]] = [UpsertEdge(a, a if itself else b, "next")]
        if to is not None:
            commands.append(UpsertEdge(a, to, "about"))
        return commands

    return step


def two(tag: str) -> Ingest:
    return Ingest((NewRecord(f"{tag} one", (f"tag:{tag}",)), NewRecord(f"{tag} two")))


async def entries(url: str, tag: str) -> list[Any]:
    """The ledger entries of the records tagged so, and of the edges from them, with the
    transaction that wrote each."""
    async with sql(url) as conn:
        return await conn.fetch(
            """SELECT l.kind, l.object_id, l.xmin::text AS txn FROM ledger l
            WHERE l.object_id IN (SELECT id FROM records WHERE content LIKE $1)
               OR l.state->>'from_id' IN (SELECT id FROM records WHERE content LIKE $1)""",
            f"{tag} %",
        )


async def test_a_later_step_sees_the_records_the_first_wrote_in_the_same_transaction(
    gateway: Gateway,
) -> None:
    target = (await ingest(gateway, "the target"))["id"]
    async with executor_on(gateway) as executor:
        command = Together((two("alone"),), (linking(target),), Records((target,)).locks())
        # It locks a record, so it runs on its own; the same without the target is
        # written in a group commit (its first step locks nothing).
        assert command.locks() != Locks()
        written: Written = await executor.execute("dev", command)
        grouped = Together((two("grouped"),), (linking(),))
        assert grouped.locks() == Locks()
        done: list[Written] = await asyncio.gather(
            *(executor.execute("dev", grouped) for _ in range(3))
        )
    assert written.count == 2 and [type(r).__name__ for r in written.results] == [
        "list",
        "Edge",
        "Edge",
    ]
    [records, edge, about] = written.results
    assert (edge.from_id, edge.to_id) == (records[0].id, records[1].id)
    assert (about.from_id, about.to_id) == (records[0].id, target)
    rows = await entries(gateway.database_url, "alone")
    assert sorted(r["kind"] for r in rows) == ["edge", "edge", "record", "record"]
    assert len({r["txn"] for r in rows}) == 1
    assert all(w.count == 2 and len(w.results) == 2 for w in done)
    rows = await entries(gateway.database_url, "grouped")
    assert sorted(r["kind"] for r in rows) == ["edge"] * 3 + ["record"] * 6
    # Each command's records and edge are written together.
    by_record = {r["object_id"]: r["txn"] for r in rows if r["kind"] == "record"}
    for w in done:
        [records, edge] = w.results
        assert {by_record[r.id] for r in records} == {
            next(r["txn"] for r in rows if r["object_id"] == edge.id)
        }


async def test_a_refused_later_step_writes_nothing_of_the_earlier(gateway: Gateway) -> None:
    other = (await ingest(gateway, "other"))["id"]
    async with executor_on(gateway) as executor:
        # On its own (it locks a record) and in a group commit (it locks nothing).
        for tag, ahead in (("refused", Records((other,)).locks()), ("refused-grouped", Locks())):
            # An edge from a record to itself is refused, so its records are not written.
            command = Together((two(tag),), (linking(itself=True),), ahead)
            with pytest.raises(InvalidInputError, match="two different records"):
                await executor.execute("dev", command)
            assert await entries(gateway.database_url, tag) == []


async def test_a_later_step_may_lock_only_what_the_first_locked_or_wrote(
    gateway: Gateway,
) -> None:
    target = (await ingest(gateway, "elsewhere"))["id"]
    other = (await ingest(gateway, "other"))["id"]
    async with executor_on(gateway) as executor:
        # On its own: the target was not locked by the first step.
        ahead = Records((other,)).locks()
        with pytest.raises(StepError, match=f"record '{target}'"):
            await executor.execute("dev", Together((two("late"),), (linking(target),), ahead))
        # In a group: a later step names only what its earlier steps wrote.
        with pytest.raises(StepError, match=f"record '{target}'"):
            await executor.execute("dev", Together((two("late-group"),), (linking(target),)))
    assert await entries(gateway.database_url, "late") == []
    assert await entries(gateway.database_url, "late-group") == []


async def test_retiring_records_together_retires_each_attached_edge_once(
    gateway: Gateway,
) -> None:
    a, b, c = [(await ingest(gateway, f"r {n}"))["id"] for n in range(3)]
    async with executor_on(gateway) as executor:
        for start, end in ((a, b), (b, c), (c, a)):
            await executor.execute("dev", UpsertEdge(start, end, "next"))
        # a and b go together; the edge between them is retired once, those to c too.
        gone = await executor.execute("dev", RetireRecords((a, b), "both"))
        assert [r.id for r in gone] == [a, b] and all(r.retirement for r in gone)
        # A retirement locked beside another record retires only its own edges.
        d, e = [(await ingest(gateway, f"s {n}"))["id"] for n in range(2)]
        await executor.execute("dev", UpsertEdge(d, e, "next"))
        await executor.execute("dev", UpsertEdge(e, c, "next"))
        step = Together((RetireRecord(d, "one"),), ahead=Records((e,)).locks())
        await executor.execute("dev", step)
        # A command beside a retirement is refused a retired record, as on its own.
        with pytest.raises(RetiredRecordError):
            await executor.execute(
                "dev", Together((RetireRecord(c, "x"), UpsertEdge(e, d, "again")))
            )
    async with sql(gateway.database_url) as conn:
        rows = await conn.fetch(
            "SELECT from_id, to_id, expired_at IS NOT NULL AS retired, version FROM edges "
            "WHERE from_id = ANY($1)",
            [a, b, c, d, e],
        )
    held = {(r["from_id"], r["to_id"]): (r["retired"], r["version"]) for r in rows}
    assert held == {
        (a, b): (True, 2),
        (b, c): (True, 2),
        (c, a): (True, 2),
        (d, e): (True, 2),
        (e, c): (False, 1),
    }
