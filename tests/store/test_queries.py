"""Read-path queries on rows only the engine can write, inside transactions rolled back."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from asyncpg import Connection
from sqlalchemy import Table

from store import tables as t
from store.errors import AmbiguousIdError, NotFoundError
from store.kinds.record.model import Record, RecordState, parse_pairs
from store.kinds.record.projection import label_changes
from store.kinds.record.reads import gather as gather_read
from store.kinds.record.resolve import resolve_id
from store.reads.gather_mode import GatherMode
from tests.support import Gateway, sql

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def conn(gateway: Gateway) -> AsyncIterator[Connection]:
    """A connection to the module's database whose writes are rolled back."""
    async with sql(gateway.database_url) as connection:
        transaction = connection.transaction()
        await transaction.start()
        try:
            yield connection
        finally:
            await transaction.rollback()


async def insert_rows(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    columns = list(rows[0])
    await conn.executemany(
        f"INSERT INTO {table.name} ({', '.join(columns)}) "
        f"VALUES ({', '.join(f'${n + 1}' for n in range(len(columns)))})",
        [[row[c] for c in columns] for row in rows],
    )


async def add_records(conn: Connection, ids_by_lane: dict[str, list[str]]) -> None:
    await insert_rows(
        conn,
        t.records,
        [
            {
                "id": rid,
                "lane": lane,
                "source_type": "conversational",
                "authority": "conversational",
                "content": "row",
                "properties": "[]",
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


async def test_prefix_candidates_are_only_the_readable_records(conn: Connection) -> None:
    prefix = "sr_" + uuid.uuid4().hex[:8]
    mine = [prefix + f"{n:x}" + "0" * 23 for n in range(1, 8)]
    hidden = prefix + "0" * 24
    await add_records(conn, {"default": mine, "secret": [hidden]})

    with pytest.raises(AmbiguousIdError) as caught:
        await resolve_id(conn, prefix, ["default", "secret"])
    assert caught.value.candidates == sorted([hidden, *mine])[:5]
    assert caught.value.code == "AMBIGUOUS_ID"

    # A record in a lane the caller cannot read is neither a candidate nor a match.
    with pytest.raises(AmbiguousIdError) as caught:
        await resolve_id(conn, prefix, ["default"])
    assert hidden not in caught.value.candidates
    assert caught.value.candidates == mine[:5]
    assert await resolve_id(conn, prefix + "0", ["default", "secret"]) == hidden
    with pytest.raises(NotFoundError):
        await resolve_id(conn, prefix + "0", ["default"])
    with pytest.raises(NotFoundError):
        await resolve_id(conn, hidden, ["default"])
    assert await resolve_id(conn, mine[2][:12].upper(), ["default"]) == mine[2]


async def test_labels_leave_out_the_engines_labels(conn: Connection) -> None:
    rid = "sr_" + uuid.uuid4().hex
    label = "topic_" + uuid.uuid4().hex[:8]
    await add_records(conn, {"default": [rid]})
    await insert_rows(
        conn,
        t.edge_properties,
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
    moved: Counter[tuple[str, str]] = Counter()
    label_changes(None, carrying, moved)
    assert moved == {("default", label): 1}

    # Gather leaves the adjustment label out of set operations, but not the others.
    page = await gather_read.gather(
        conn, ["e_adjustment:v"], GatherMode.UNION, ["default"], None, None, None
    )
    assert page.items == []
    page = await gather_read.gather(
        conn,
        ["e_group:v", f"{label}:v"],
        GatherMode.INTERSECT,
        ["default"],
        None,
        None,
        None,
    )
    assert page.items == [rid]
