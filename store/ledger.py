"""The write path: one transaction per command, the guard deciding inside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from policies import guard
from policies.errors import PolicyError, PropertyFormatError, ReservedLabelError
from policies.model import DEFAULT_LANE, AgentProfile, Policy
from policies.properties import Property, is_reserved_label, parse_properties, parse_property
from store import commands as c
from store import tables as t
from store.bulk import json_rows, rows_insert
from store.errors import BatchItemError, InvalidInputError, StoreError, VersionConflictError
from store.hashing import entry_hash
from store.ids import edge_property_id, new_event_id, new_record_id
from store.policy_store import PolicyCache, PolicyVersion, lock_for_write
from store.records import Record, RecordState
from store.resolve import resolve_record_id

# New records in one statement: each table's rows arrive as one JSON parameter, and
# PostgreSQL runs every data-modifying CTE whether or not the outer query reads it.
_INGEST = rows_insert(
    t.audit_events,
    [
        "id",
        "kind",
        "record_id",
        "lane",
        "actor",
        "at",
        "payload",
        "version_before",
        "version_after",
        "object_kind",
        "object_id",
    ],
    "events",
).add_cte(
    rows_insert(t.records, [c.name for c in t.records.c], "records").cte("new_records"),
    rows_insert(
        t.ledger,
        [c.name for c in t.ledger.c if c.name not in ("seq", "txid", "hash_format")],
        "entries",
    ).cte("new_entries"),
    rows_insert(t.edge_properties, [c.name for c in t.edge_properties.c], "memberships").cte(
        "new_memberships"
    ),
)

MAX_CONTENT_CHARS = 1_000_000
MAX_PROPERTIES = 256
MAX_BATCH = 1000
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class _Txn:
    """What every write learns at the start of its transaction."""

    conn: AsyncConnection
    policy: PolicyVersion
    agent: AgentProfile
    at: datetime

    @property
    def rules(self) -> Policy:
        return self.policy.policy


class Ledger:
    """The only way records change. Each method is one transaction."""

    def __init__(self, engine: AsyncEngine, policies: PolicyCache) -> None:
        self.engine = engine
        self.policies = policies

    async def _begin(self, conn: AsyncConnection, agent: str) -> _Txn:
        version, at = await lock_for_write(conn, self.policies)
        return _Txn(conn, version, version.policy.agent(agent), at)

    # -- ingest -------------------------------------------------------------

    async def ingest(self, agent: str, commands: Sequence[c.Ingest]) -> list[Record]:
        """Write new records, all or nothing; a known idempotency key returns its record."""
        if not commands:
            return []
        if len(commands) > MAX_BATCH:
            raise InvalidInputError(
                f"ingestMany takes at most {MAX_BATCH} records per call (got {len(commands)})",
                allowed=MAX_BATCH,
            )
        try:
            return await self._ingest(agent, commands)
        except IntegrityError as exc:
            # Two calls raced on one idempotency key: the loser reads the winner's record.
            if "uq_records_created_by_idempotency_key" not in str(exc.orig):
                raise
            return await self._ingest(agent, commands)

    async def _ingest(self, agent: str, commands: Sequence[c.Ingest]) -> list[Record]:
        async with self.engine.begin() as conn:
            txn = await self._begin(conn, agent)
            existing = await self._idempotent(conn, agent, commands)
            results: list[Record] = []
            writes: list[tuple[str, RecordState, c.Ingest]] = []
            for index, command in enumerate(commands):
                known = existing.get(command.idempotency_key or "")
                try:
                    if known is not None:
                        # A retry asks again to write where the first call wrote: under
                        # a newer policy that lane may be closed to the caller.
                        guard.check_write_lane(txn.rules, txn.agent, known.lane)
                    else:
                        state = self._new_state(txn, command)
                except (PolicyError, StoreError) as exc:
                    if len(commands) == 1:
                        raise
                    raise BatchItemError(index, exc) from exc
                if known is not None:
                    results.append(known)
                    continue
                record_id = new_record_id()
                writes.append((record_id, state, command))
                results.append(Record(record_id, 1, state, txn.at, txn.at, agent))
            if writes:
                await self._insert_records(txn, writes)
            return results

    async def _idempotent(
        self, conn: AsyncConnection, agent: str, commands: Sequence[c.Ingest]
    ) -> dict[str, Record]:
        keys = [cmd.idempotency_key for cmd in commands if cmd.idempotency_key]
        if not keys:
            return {}
        if len(set(keys)) != len(keys):
            raise InvalidInputError("each idempotencyKey may appear once per ingestMany call")
        rows = await conn.execute(
            select(t.records).where(
                and_(t.records.c.created_by == agent, t.records.c.idempotency_key.in_(keys))
            )
        )
        return {row["idempotency_key"]: Record.from_row(row) for row in rows.mappings()}

    def _new_state(self, txn: _Txn, command: c.Ingest) -> RecordState:
        lane = command.lane or DEFAULT_LANE
        guard.check_write_lane(txn.rules, txn.agent, lane)
        _check_content(command.content)
        properties = _parse_caller_properties(command.properties)
        stamp = guard.check_record(
            txn.rules, txn.agent, lane, command.source_type, command.content, properties
        )
        return RecordState(
            content=command.content,
            lane=stamp.lane,
            source_type=stamp.source_type,
            authority=stamp.authority,
            properties=tuple(properties),
        )

    async def _insert_records(
        self, txn: _Txn, writes: Sequence[tuple[str, RecordState, c.Ingest]]
    ) -> None:
        record_rows: list[dict[str, Any]] = []
        ledger_rows: list[dict[str, Any]] = []
        ep_rows: list[dict[str, Any]] = []
        event_rows: list[dict[str, Any]] = []
        for record_id, state, command in writes:
            entry = self._entry(txn, record_id, 1, "sr_ingested", state, None, txn.at)
            ledger_rows.append(entry)
            record_rows.append(
                {
                    "id": record_id,
                    "lane": state.lane,
                    "source_type": state.source_type,
                    "authority": state.authority,
                    "content": state.content,
                    "properties": entry["state"]["properties"],
                    "version": 1,
                    "created_at": txn.at,
                    "updated_at": txn.at,
                    "created_by": txn.agent.name,
                    "idempotency_key": command.idempotency_key,
                    "ledger_hash": entry["hash"],
                }
            )
            ep_rows.extend(_membership(record_id, state.lane, state.properties, txn.at, 1))
            event_rows.append(
                _event(
                    txn,
                    "sr_ingested",
                    record_id,
                    state.lane,
                    {
                        "sourceType": state.source_type,
                        "authority": state.authority,
                        "properties": [str(p) for p in state.properties],
                    },
                    None,
                    1,
                )
            )
        await txn.conn.execute(
            _INGEST,
            {
                "records": json_rows(record_rows),
                "entries": json_rows(ledger_rows),
                "memberships": json_rows(ep_rows),
                "events": json_rows(event_rows),
            },
        )

    # -- changes to one record ------------------------------------------------

    async def update(self, agent: str, command: c.Update) -> Record:
        """Replace content and/or the values of the named labels; no change writes nothing."""
        async with self.engine.begin() as conn:
            txn = await self._begin(conn, agent)
            record = await self._lock(txn, command.record_id)
            guard.check_write_lane(txn.rules, txn.agent, record.lane)
            if command.expected_version is not None and command.expected_version != record.version:
                raise VersionConflictError(record.id, command.expected_version, record.version)
            content = record.state.content if command.content is None else command.content
            _check_content(content)
            properties = list(record.state.properties)
            if command.properties is not None:
                named = _parse_caller_properties(command.properties)
                labels = {p.label for p in named}
                merged = [p for p in properties if p.label not in labels] + named
                # The values already held, named in another order, are no change.
                if set(merged) != set(properties):
                    properties = merged
                _check_count(len(properties))
            stamp = guard.check_record(
                txn.rules, txn.agent, record.lane, record.state.source_type, content, properties
            )
            state = RecordState(
                content, stamp.lane, stamp.source_type, stamp.authority, tuple(properties)
            )
            if state == record.state:
                return record
            before = set(record.state.properties)
            after = set(state.properties)
            payload: dict[str, Any] = {
                "contentChanged": content != record.state.content,
                "added": [str(p) for p in state.properties if p not in before],
                "removed": [str(p) for p in record.state.properties if p not in after],
            }
            if stamp.authority != record.state.authority:
                payload["authority"] = stamp.authority
            return await self._write_version(txn, record, state, "sr_updated", [payload])

    async def add_properties(self, agent: str, command: c.AddProperties) -> c.PropertyChange:
        """Add-only: held values are reported, reserved labels rejected, the rest added."""
        async with self.engine.begin() as conn:
            txn = await self._begin(conn, agent)
            record = await self._lock(txn, command.record_id)
            guard.check_write_lane(txn.rules, txn.agent, record.lane)
            held = set(record.state.properties)
            added: list[Property] = []
            already: list[str] = []
            rejected: list[str] = []
            for text in command.properties:
                prop = parse_property(text)
                if prop.reserved:
                    rejected.append(str(prop))
                elif prop in held or prop in added:
                    already.append(str(prop))
                else:
                    added.append(prop)
            _check_count(len(record.state.properties) + len(added))
            guard.check_added_labels(txn.rules, txn.agent, record.lane, [p.label for p in added])
            if added:
                state = _with_properties(record.state, [*record.state.properties, *added])
                payloads = [_property_payload(record.id, p) for p in added]
                record = await self._write_version(
                    txn, record, state, "property_added", payloads, per_event="property_added"
                )
            return c.PropertyChange(
                record=record,
                added=[str(p) for p in added],
                already_held=already,
                rejected=rejected,
            )

    async def remove_properties(self, agent: str, command: c.RemoveProperties) -> c.PropertyChange:
        """Remove whole labels and/or single values; what is not held is reported."""
        if not command.labels and not command.properties:
            raise InvalidInputError("removeProperties needs labels, properties, or both")
        labels = [_clean_label(label) for label in command.labels]
        values = parse_properties(command.properties)
        reserved = sorted(
            {lb for lb in labels if is_reserved_label(lb)} | {p.label for p in values if p.reserved}
        )
        if reserved:
            raise ReservedLabelError(reserved, operation="removed by removeProperties")
        async with self.engine.begin() as conn:
            txn = await self._begin(conn, agent)
            record = await self._lock(txn, command.record_id)
            guard.check_write_lane(txn.rules, txn.agent, record.lane)
            held = record.state.properties
            gone = [p for p in held if p.label in labels or p in values]
            not_held = [lb for lb in labels if all(p.label != lb for p in held)]
            not_held += [str(p) for p in values if p not in held]
            if gone:
                state = _with_properties(record.state, [p for p in held if p not in gone])
                payloads = [_property_payload(record.id, p) for p in gone]
                record = await self._write_version(
                    txn, record, state, "property_removed", payloads, per_event="property_removed"
                )
            return c.PropertyChange(
                record=record, removed=[str(p) for p in gone], not_held=not_held
            )

    # -- shared steps -----------------------------------------------------------

    async def _lock(self, txn: _Txn, ident: str) -> Record:
        readable = txn.agent.readable_lanes(txn.rules)
        record_id = await resolve_record_id(txn.conn, ident, readable)
        row = (
            (
                await txn.conn.execute(
                    select(t.records).where(t.records.c.id == record_id).with_for_update()
                )
            )
            .mappings()
            .one()
        )
        return Record.from_row(row)

    def _entry(
        self,
        txn: _Txn,
        record_id: str,
        version: int,
        event: str,
        state: RecordState,
        prev_hash: str | None,
        at: datetime,
    ) -> dict[str, Any]:
        body = state.to_json()
        fields: dict[str, Any] = {
            "kind": "record",
            "object_id": record_id,
            "version": version,
            "event": event,
            "actor": txn.agent.name,
            "at": at,
            "policy_version": txn.policy.version,
            "state": body,
            "prev_hash": prev_hash,
        }
        return {**fields, "hash": entry_hash(**fields)}

    async def _write_version(
        self,
        txn: _Txn,
        record: Record,
        state: RecordState,
        event: str,
        payloads: Sequence[dict[str, Any]],
        per_event: str | None = None,
    ) -> Record:
        """Append version n+1 of `record`, move the projections, emit the events."""
        conn = txn.conn
        # Versions of one record must be ordered in time even when the transaction
        # that waited for the row lock started before the one that held it.
        at = max(txn.at, record.updated_at + _TICK)
        number = record.version + 1
        entry = self._entry(txn, record.id, number, event, state, record.ledger_hash, at)
        await conn.execute(insert(t.ledger), [entry])
        await conn.execute(
            update(t.records)
            .where(t.records.c.id == record.id)
            .values(
                content=state.content,
                source_type=state.source_type,
                authority=state.authority,
                properties=entry["state"]["properties"],
                version=number,
                updated_at=at,
                ledger_hash=entry["hash"],
            )
        )
        before, after = set(record.state.properties), set(state.properties)
        gone = [edge_property_id(record.id, p.label, p.value) for p in before - after]
        if gone:
            await conn.execute(
                update(t.edge_properties)
                .where(
                    and_(
                        t.edge_properties.c.record_id == record.id,
                        t.edge_properties.c.recorded_to.is_(None),
                        t.edge_properties.c.id.in_(gone),
                    )
                )
                .values(recorded_to=at, to_version=number)
            )
        fresh = [p for p in state.properties if p not in before]
        if fresh:
            await conn.execute(
                insert(t.edge_properties), _membership(record.id, record.lane, fresh, at, number)
            )
        kind = per_event or event
        await conn.execute(
            insert(t.audit_events),
            [
                _event(txn, kind, record.id, record.lane, p, record.version, number, at)
                for p in payloads
            ],
        )
        return Record(
            record.id, number, state, record.created_at, at, record.created_by, entry["hash"]
        )


def _check_content(content: str) -> None:
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInputError(
            f"content is {len(content)} characters; at most {MAX_CONTENT_CHARS} are allowed",
            allowed=MAX_CONTENT_CHARS,
        )


def _check_count(count: int) -> None:
    if count > MAX_PROPERTIES:
        raise InvalidInputError(
            f"a record may carry at most {MAX_PROPERTIES} edge properties (this would be {count})",
            allowed=MAX_PROPERTIES,
        )


def _parse_caller_properties(texts: Sequence[str]) -> list[Property]:
    properties = parse_properties(texts)
    guard.check_caller_properties(properties)
    _check_count(len(properties))
    return properties


def _clean_label(label: str) -> str:
    cleaned = label.strip().replace(" ", "_")
    if not cleaned:
        raise PropertyFormatError(label, "a label to remove is empty; name it, for example org")
    return cleaned


def _with_properties(state: RecordState, properties: Sequence[Property]) -> RecordState:
    return RecordState(
        state.content, state.lane, state.source_type, state.authority, tuple(properties)
    )


def _property_payload(record_id: str, prop: Property) -> dict[str, Any]:
    return {
        "property": str(prop),
        "label": prop.label,
        "value": prop.value,
        "edgePropertyId": edge_property_id(record_id, prop.label, prop.value),
    }


def _membership(
    record_id: str, lane: str, properties: Sequence[Property], at: datetime, version: int
) -> list[dict[str, Any]]:
    return [
        {
            "id": edge_property_id(record_id, p.label, p.value),
            "record_id": record_id,
            "lane": lane,
            "label": p.label,
            "value": p.value,
            "recorded_from": at,
            "recorded_to": None,
            "from_version": version,
            "to_version": None,
        }
        for p in properties
    ]


def _event(
    txn: _Txn,
    kind: str,
    record_id: str,
    lane: str,
    payload: dict[str, Any],
    before: int | None,
    after: int,
    at: datetime | None = None,
) -> dict[str, Any]:
    return {
        "id": new_event_id(),
        "kind": kind,
        "record_id": record_id,
        "lane": lane,
        "actor": txn.agent.name,
        "at": at or txn.at,
        "payload": payload,
        "version_before": before,
        "version_after": after,
        "object_kind": "record",
        "object_id": record_id,
    }
