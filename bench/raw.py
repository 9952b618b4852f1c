"""The baseline: a raw asyncpg pool replaying the gateway's recorded SQL.

Each connection gets the gateway pool's JSON/JSONB codecs (binary format, orjson),
so parameters travel exactly as the gateway sends them. A write trace is replayed
with fresh record, edge-property and audit-event ids (everything else as recorded),
so each replay inserts new rows the way a new call would.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson

from bench.capture import Statement, Trace, Unit
from store.pool import SESSION_SETTINGS

# Ids stand alone as parameters, or inside the JSON rows of a set-based insert.
_ID = re.compile(r"\b(sr|ep|ae)_[0-9a-f]{32}\b")


def _json_bytes(value: Any) -> bytes:
    # A JSON parameter the template already holds as text (with fresh ids) goes as is.
    return value.encode() if isinstance(value, str) else orjson.dumps(value)


async def codecs(conn: asyncpg.Connection) -> None:
    """The gateway pool's codecs (`store.pool.json_codecs`: the binary format, orjson's
    bytes), so parameters travel as the gateway sends them; JSON text goes as it is."""
    await conn.set_type_codec(
        "jsonb",
        encoder=lambda value: b"\x01" + _json_bytes(value),  # jsonb's version byte
        decoder=lambda data: orjson.loads(memoryview(data)[1:]),
        schema="pg_catalog",
        format="binary",
    )
    await conn.set_type_codec(
        "json", encoder=_json_bytes, decoder=orjson.loads, schema="pg_catalog", format="binary"
    )


async def _keep(conn: asyncpg.Connection) -> None:
    """No reset query when a connection comes back: like the gateway's pool (store.pool),
    the replay changes no session state, and asyncpg's default reset would cost the raw
    side a round trip per call that the gateway does not make."""


async def open_pool(url: str, size: int) -> asyncpg.Pool:
    # The gateway's session settings (no JIT), so both sides run the same plans.
    pool: asyncpg.Pool = await asyncpg.create_pool(
        url,
        min_size=size,
        max_size=size,
        init=codecs,
        reset=_keep,
        server_settings=SESSION_SETTINGS,
    )
    return pool


async def run_unit(conn: asyncpg.Connection, unit: Unit, params: list[Any] | None = None) -> Any:
    """One transaction as the gateway ran it; returns the last statement's rows."""
    rows: Any = None
    if not unit.transaction:
        # As the read path runs it: one statement on its own, or its own BEGIN/ROLLBACK.
        for n, stmt in enumerate(unit.statements):
            bound = stmt.params if params is None else params[n]
            if not bound and stmt.sql.startswith("BEGIN"):
                # A transaction's BEGIN with its lanes' settings (`store.reads.lane_floor`):
                # several commands in one simple query, as the gateway sends it.
                await conn.execute(stmt.sql)
            else:
                rows = await conn.fetch(stmt.sql, *bound)
        return rows
    transaction = conn.transaction()
    await transaction.start()
    try:
        for n, stmt in enumerate(unit.statements):
            bound = stmt.params if params is None else params[n]
            if stmt.many:
                await conn.executemany(stmt.sql, bound)
            else:
                rows = await conn.fetch(stmt.sql, *bound)
    except BaseException:
        await transaction.rollback()
        raise
    if unit.commit:
        await transaction.commit()
    else:
        await transaction.rollback()
    return rows


async def replay(pool: asyncpg.Pool, trace: Trace) -> Any:
    """A read trace exactly as recorded, one pooled connection per unit (as the gateway);
    the last statement's rows."""
    rows = None
    for unit in trace:
        async with pool.acquire() as conn:
            rows = await run_unit(conn, unit)
    return rows


def _is_fold(unit: Unit) -> bool:
    """Whether a unit is the count deltas' fold (`store.kinds.record.counts.fold`)."""
    return unit.commit and any("pg_try_advisory_xact_lock" in s.sql for s in unit.statements)


def _new_id(old: str) -> str:
    return old[:3] + os.urandom(16).hex()


@dataclass
class WriteTemplate:
    """A recorded write with the places of its ids, to replay with fresh ones."""

    unit: Unit
    # per statement: (row, column) of every id; row is -1 for a single execute
    places: list[list[tuple[int, int]]]
    records: int

    @classmethod
    def of(cls, trace: Trace) -> WriteTemplate:
        # After its transaction the gateway may fold the count deltas (its own short
        # transaction, off the write): the gateway pays it, raw replays the write alone.
        write, *after = trace
        if not write.commit or not all(_is_fold(u) for u in after):
            raise ValueError(f"a write call should be one committed transaction, got {trace}")
        unit = _json_as_text(write)
        places: list[list[tuple[int, int]]] = []
        for stmt in unit.statements:
            rows = stmt.params if stmt.many else [stmt.params]
            found = [
                (r if stmt.many else -1, c)
                for r, row in enumerate(rows)
                for c, value in enumerate(row)
                if isinstance(value, str) and _ID.search(value)
            ]
            places.append(found)
        records = sum(
            len(s.params) if s.many else 1
            for s in unit.statements
            if s.sql.startswith("INSERT INTO records ")
        )
        if records == 0:  # one statement: rows in its VALUES list or in a JSON parameter
            records = sum(_values_rows(s) for s in unit.statements if "INTO records " in s.sql)
        return cls(unit, places, records)

    def fresh(self) -> list[Any]:
        """Parameters for one replay: same values, new ids (consistent across statements)."""
        mapping: dict[str, str] = {}
        out: list[Any] = []
        for stmt, places in zip(self.unit.statements, self.places, strict=True):
            out.append(_rebind(stmt, places, mapping))
        return out


def _json_as_text(unit: Unit) -> Unit:
    """The unit with its JSON row parameters as JSON text, so fresh ids are a text
    substitution; `codecs` sends such text as it is."""

    def text(value: Any) -> Any:
        rows = isinstance(value, list) and any(isinstance(v, dict) for v in value)
        return orjson.dumps(value).decode() if rows or isinstance(value, dict) else value

    statements = [
        Statement(s.sql, s.params if s.many else tuple(text(p) for p in s.params), s.many)
        for s in unit.statements
    ]
    return Unit(statements, commit=unit.commit, transaction=unit.transaction)


def _values_rows(stmt: Statement) -> int:
    if "jsonb_to_recordset" in stmt.sql:
        # the records rows are the JSON parameter whose rows carry a ledger_hash
        for value in stmt.params:
            rows = json.loads(value) if isinstance(value, str) and value[:1] == "[" else None
            if rows and isinstance(rows[0], dict) and "ledger_hash" in rows[0]:
                return len(rows)
    return stmt.sql.count("), (") + 1 if " VALUES (" in stmt.sql else 1


def _rebind(stmt: Statement, places: list[tuple[int, int]], mapping: dict[str, str]) -> Any:
    if not places:
        return stmt.params

    def swap(match: re.Match[str]) -> str:
        old = match.group(0)
        return mapping.get(old) or mapping.setdefault(old, _new_id(old))

    if not stmt.many:
        row = list(stmt.params)
        for _, c in places:
            row[c] = _ID.sub(swap, row[c])
        return tuple(row)
    rows = [list(r) for r in stmt.params]
    for r, c in places:
        rows[r][c] = _ID.sub(swap, rows[r][c])
    return [tuple(r) for r in rows]
