"""Checking the ledger: its hash chains hold, and the projections equal a rebuild from it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store import tables as t
from store.hashing import entry_hash, legacy_entry_hash
from store.ids import edge_property_id
from store.records import RecordState

HASHED = ("object_id", "version", "event", "actor", "at", "policy_version", "state", "prev_hash")


@dataclass
class Report:
    """What verify found; `problems` is empty when everything holds."""

    records: int = 0
    entries: int = 0
    memberships: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


# (id, record_id, lane, label, value, valid_from, valid_to, from_version, to_version)
Membership = tuple[str, str, str, str, str, datetime, datetime | None, int, int | None]


async def _entries(conn: AsyncConnection) -> AsyncIterator[dict[str, Any]]:
    stream = await conn.stream(
        select(t.ledger)
        .where(t.ledger.c.kind == "record")
        .order_by(t.ledger.c.object_id, t.ledger.c.version)
    )
    async for row in stream.mappings():
        yield dict(row)


def _rebuild_one(
    entries: list[dict[str, Any]], report: Report
) -> tuple[dict[str, Any], list[Membership]]:
    """Replay one record's entries into its records row and membership rows."""
    record_id = entries[0]["object_id"]
    prev_hash: str | None = None
    opened: dict[str, tuple[str, str, str, datetime, int]] = {}
    memberships: list[Membership] = []
    for number, entry in enumerate(entries, start=1):
        if entry["version"] != number:
            report.problems.append(
                f"{record_id}: version {entry['version']} where {number} was expected"
            )
        if entry["prev_hash"] != prev_hash:
            report.problems.append(f"{record_id} v{entry['version']}: prev_hash breaks the chain")
        fields = {k: entry[k] for k in HASHED}
        digest = (
            legacy_entry_hash(**fields)
            if entry["hash_format"] == 1
            else entry_hash(kind=entry["kind"], **fields)
        )
        if digest != entry["hash"]:
            report.problems.append(f"{record_id} v{entry['version']}: hash does not match content")
        prev_hash = entry["hash"]
        state = RecordState.from_json(entry["state"])
        now = {edge_property_id(record_id, p.label, p.value): p for p in state.properties}
        for ep_id in [k for k in opened if k not in now]:
            lane, label, value, since, from_v = opened.pop(ep_id)
            memberships.append(
                (ep_id, record_id, lane, label, value, since, entry["at"], from_v, entry["version"])
            )
        for ep_id, prop in now.items():
            if ep_id not in opened:
                opened[ep_id] = (state.lane, prop.label, prop.value, entry["at"], entry["version"])
    for ep_id, (lane, label, value, since, from_v) in opened.items():
        memberships.append((ep_id, record_id, lane, label, value, since, None, from_v, None))
    first, last = entries[0], entries[-1]
    final = RecordState.from_json(last["state"])
    record = {
        "id": record_id,
        "lane": final.lane,
        "source_type": final.source_type,
        "authority": final.authority,
        "content": final.content,
        "properties": last["state"]["properties"],
        "version": last["version"],
        "created_at": first["at"],
        "updated_at": last["at"],
        "created_by": first["actor"],
        "ledger_hash": last["hash"],
    }
    return record, memberships


async def _check_policies(conn: AsyncConnection, report: Report) -> None:
    """The policy chain holds and policy_versions equals its entries."""
    rows = (
        await conn.execute(
            select(t.ledger).where(t.ledger.c.kind == "policy").order_by(t.ledger.c.version)
        )
    ).mappings()
    prev: str | None = None
    rebuilt: dict[int, tuple[str, datetime, str]] = {}
    for entry in rows:
        report.entries += 1
        fields = {k: entry[k] for k in HASHED}
        if entry["prev_hash"] != prev:
            report.problems.append(f"policy v{entry['version']}: prev_hash breaks the chain")
        if entry_hash(kind="policy", **fields) != entry["hash"]:
            report.problems.append(f"policy v{entry['version']}: hash does not match content")
        prev = entry["hash"]
        rebuilt[entry["version"]] = (entry["state"]["yaml"], entry["at"], entry["actor"])
    pv = t.policy_versions
    live = {
        row[0]: (row[1], row[2], row[3])
        for row in await conn.execute(
            select(pv.c.version, pv.c.yaml, pv.c.applied_at, pv.c.applied_by)
        )
    }
    if live != rebuilt:
        report.problems.append("policy_versions differs from the ledger's policy entries")


async def verify(engine: AsyncEngine) -> Report:
    """Replay the whole ledger and compare it with the live projections."""
    report = Report()
    rebuilt: dict[str, dict[str, Any]] = {}
    members: set[Membership] = set()
    async with engine.connect() as conn:
        current: list[dict[str, Any]] = []
        async for entry in _entries(conn):
            report.entries += 1
            if current and current[0]["object_id"] != entry["object_id"]:
                record, rows = _rebuild_one(current, report)
                rebuilt[record["id"]] = record
                members.update(rows)
                current = []
            current.append(entry)
        if current:
            record, rows = _rebuild_one(current, report)
            rebuilt[record["id"]] = record
            members.update(rows)
        await _check_policies(conn, report)
        columns = [c for c in t.records.c if c.name != "idempotency_key"]
        live = {row["id"]: dict(row) for row in (await conn.execute(select(*columns))).mappings()}
        ep = t.edge_properties
        live_members = {
            tuple(row)
            for row in await conn.execute(
                select(
                    ep.c.id,
                    ep.c.record_id,
                    ep.c.lane,
                    ep.c.label,
                    ep.c.value,
                    ep.c.recorded_from,
                    ep.c.recorded_to,
                    ep.c.from_version,
                    ep.c.to_version,
                )
            )
        }
    report.records = len(live)
    report.memberships = len(live_members)
    for record_id in sorted(rebuilt.keys() - live.keys()):
        report.problems.append(f"{record_id}: in the ledger but missing from records")
    for record_id in sorted(live.keys() - rebuilt.keys()):
        report.problems.append(f"{record_id}: in records but has no ledger entry")
    for record_id in sorted(rebuilt.keys() & live.keys()):
        for column, value in rebuilt[record_id].items():
            if live[record_id][column] != value:
                report.problems.append(f"{record_id}: records.{column} differs from the ledger")
    for row in sorted(members - live_members, key=str)[:50]:
        report.problems.append(
            f"{row[1]}: membership {row[3]}:{row[4]} missing from the projection"
        )
    for row in sorted(live_members - members, key=str)[:50]:
        report.problems.append(f"{row[1]}: membership {row[3]}:{row[4]} not in the ledger")
    return report
