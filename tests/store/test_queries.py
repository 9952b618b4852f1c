"""Read-path queries on rows only the engine can write, inside transactions rolled back."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from store import queries
from store import tables as t
from store.database import create_engine
from store.errors import AmbiguousIdError, NotFoundError
from store.projection import label_changes
from store.records import Record, RecordState, parse_pairs
from store.resolve import resolve_record_id
from tests.support import Gateway

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def conn(gateway: Gateway) -> AsyncIterator[AsyncConnection]:
    """A connection to the module's database whose writes are rolled back."""
    engine = create_engine(gateway.database_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            transaction = await connection.begin()
            try:
                yield connection
            finally:
                await transaction.rollback()
    finally:
        await engine.dispose()


async def add_records(conn: AsyncConnection, ids_by_lane: dict[str, list[str]]) -> None:
    await conn.execute(
        insert(t.records),
        [
            {
                "id": rid,
                "lane": lane,
                "source_type": "conversational",
                "authority": "conversational",
                "content": "row",
                "properties": [],
                "version": 1,
                "created_at": NOW,
                "updated_at": NOW,
                "created_by": "dev",
                "ledger_hash": "x",
            }
            for lane, ids in ids_by_lane.items()
            for rid in ids
        ],
    )


async def test_prefix_candidates_are_only_the_readable_records(conn: AsyncConnection) -> None:
    prefix = "sr_" + uuid.uuid4().hex[:8]
    mine = [prefix + f"{n:x}" + "0" * 23 for n in range(1, 8)]
    hidden = prefix + "0" * 24
    await add_records(conn, {"default": mine, "secret": [hidden]})

    with pytest.raises(AmbiguousIdError) as caught:
        await resolve_record_id(conn, prefix, ["default", "secret"])
    assert caught.value.candidates == sorted([hidden, *mine])[:5]
    assert caught.value.code == "AMBIGUOUS_ID"

    # A record in a lane the caller cannot read is neither a candidate nor a match.
    with pytest.raises(AmbiguousIdError) as caught:
        await resolve_record_id(conn, prefix, ["default"])
    assert hidden not in caught.value.candidates
    assert caught.value.candidates == mine[:5]
    assert await resolve_record_id(conn, prefix + "0", ["default", "secret"]) == hidden
    with pytest.raises(NotFoundError):
        await resolve_record_id(conn, prefix + "0", ["default"])
    with pytest.raises(NotFoundError):
        await resolve_record_id(conn, hidden, ["default"])
    assert await resolve_record_id(conn, mine[2][:12].upper(), ["default"]) == mine[2]


async def test_labels_leave_out_the_engines_labels(conn: AsyncConnection) -> None:
    rid = "sr_" + uuid.uuid4().hex
    label = "topic_" + uuid.uuid4().hex[:8]
    await add_records(conn, {"default": [rid]})
    await conn.execute(
        insert(t.edge_properties),
        [
            {
                "id": f"ep_{n}",
                "record_id": rid,
                "lane": "default",
                "label": name,
                "value": "v",
                "recorded_from": NOW,
                "from_version": 1,
            }
            for n, name in enumerate([label, "e_group", "e_connect", "e_adjustment"])
        ],
    )
    # Label counts never count the engine's labels.
    state = RecordState("x", "default", "conversational", "conversational", ())
    record = Record(rid, 1, state, NOW, NOW, "dev")
    carrying = replace(
        record,
        state=replace(
            state,
            properties=tuple(
                parse_pairs(
                    [[name, "v"] for name in [label, "e_group", "e_connect", "e_adjustment"]]
                )
            ),
        ),
    )
    assert label_changes(None, carrying) == {("default", label): 1}

    # Gather leaves the adjustment label out of set operations, but not the others.
    page = await queries.gather(
        conn, ["e_adjustment:v"], queries.GatherMode.UNION, ["default"], None, None, None
    )
    assert page.items == []
    page = await queries.gather(
        conn,
        ["e_group:v", f"{label}:v"],
        queries.GatherMode.INTERSECT,
        ["default"],
        None,
        None,
        None,
    )
    assert page.items == [rid]
