"""The ledger in PostgreSQL: append-only, hash-chained, the source projections rebuild from."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest

from gql.server.settings import Settings
from store.ledger.report import Report
from store.operations.verify import verify
from tests.gql._api import ADD, REMOVE, UPDATE, ingest
from tests.gql._asserted import UNGROUP, connect, group
from tests.support import Databases, Gateway, plain, run_gateway, sql, with_database


async def verify_report(url: str) -> Report:
    return await verify(url)


def canonical(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def expected_hash(row: asyncpg.Record) -> str:
    """The chain's hash, written out from the specification of docs/ledger.md alone
    (hash format 3: the state's digest in place of the state)."""
    state = json.loads(row["state"])
    digest = hashlib.sha256(canonical(state)).hexdigest()
    assert row["hash_format"] == 3 and row["state_sha256"] == digest
    body = {
        "kind": row["kind"],
        "id": row["object_id"],
        "version": row["version"],
        "event": row["event"],
        "actor": row["actor"],
        "at": row["at"].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "policy_version": row["policy_version"],
        "state_sha256": digest,
        "prev_hash": row["prev_hash"],
    }
    return hashlib.sha256(canonical(body)).hexdigest()


async def write_history(gateway: Gateway) -> str:
    """One record through ingest, update, add and remove: four versions."""
    record = await ingest(gateway, "Acme renewal, draft", ["org:Acme", "topic:renewal"])
    rid = record["id"]
    await gateway.data(UPDATE, {"id": rid, "content": "Acme renewal, signed"})
    await gateway.data(ADD, {"id": rid, "properties": ["person:Sarah", "stage:won"]})
    await gateway.data(REMOVE, {"id": rid, "labels": ["topic"]})
    return str(rid)


# -- append-only ---------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE ledger SET event = 'forged' WHERE object_id = $1",
        "UPDATE ledger SET state = jsonb_set(state, '{content}', '\"x\"') WHERE object_id = $1",
        "DELETE FROM ledger WHERE object_id = $1",
    ],
)
async def test_postgres_refuses_to_change_the_ledger(gateway: Gateway, statement: str) -> None:
    record = await ingest(gateway, "kept", ["org:Acme"])
    async with sql(gateway.database_url) as conn:
        before = await conn.fetch("SELECT * FROM ledger WHERE object_id = $1", record["id"])
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute(statement, record["id"])
        after = await conn.fetch("SELECT * FROM ledger WHERE object_id = $1", record["id"])
    assert len(before) == 1
    assert after == before


async def test_postgres_refuses_to_change_applied_policies(gateway: Gateway) -> None:
    async with sql(gateway.database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM policy_versions") >= 1
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("UPDATE policy_versions SET yaml = 'lanes: {}'")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("DELETE FROM policy_versions")


# -- the chain --------------------------------------------------------------------


async def test_each_version_is_one_entry_chained_to_the_previous(gateway: Gateway) -> None:
    rid = await write_history(gateway)
    async with sql(gateway.database_url) as conn:
        rows = await conn.fetch("SELECT * FROM ledger WHERE object_id = $1 ORDER BY version", rid)
        head = await conn.fetchrow("SELECT version, ledger_hash FROM records WHERE id = $1", rid)

    assert [r["version"] for r in rows] == [1, 2, 3, 4]
    assert [r["event"] for r in rows] == [
        "sr_ingested",
        "sr_updated",
        "property_added",
        "property_removed",
    ]
    assert rows[0]["prev_hash"] is None
    for earlier, later in zip(rows, rows[1:], strict=False):
        assert later["prev_hash"] == earlier["hash"]
        assert later["at"] > earlier["at"]
    for row in rows:
        assert row["hash"] == expected_hash(row)
        assert row["actor"] == "dev"
    assert head["version"] == 4
    assert head["ledger_hash"] == rows[-1]["hash"]

    # Each entry holds the whole state, not a delta.
    states = [json.loads(r["state"]) for r in rows]
    assert states[0] == {
        "content": "Acme renewal, draft",
        "lane": "default",
        "source_type": "conversational",
        "authority": "conversational",
        "properties": [["org", "Acme"], ["topic", "renewal"]],
    }
    assert states[1]["content"] == "Acme renewal, signed"
    assert states[1]["properties"] == states[0]["properties"]
    assert states[3]["properties"] == [["org", "Acme"], ["person", "Sarah"], ["stage", "won"]]

    # The API shows the same hashes.
    data = await gateway.data(
        "query($id: ID!) { record(id: $id) { versions { number hash } } }", {"id": rid}
    )
    assert [v["hash"] for v in data["record"]["versions"]] == [r["hash"] for r in rows]


async def test_audit_events_match_the_ledger_entries(gateway: Gateway) -> None:
    rid = await write_history(gateway)
    async with sql(gateway.database_url) as conn:
        events = await conn.fetch(
            "SELECT kind, version_before, version_after, at FROM audit_events "
            "WHERE object_id = $1 ORDER BY seq",
            rid,
        )
        entries = await conn.fetch(
            "SELECT version, event, at FROM ledger WHERE object_id = $1 ORDER BY version", rid
        )
        # Across the whole database: no version without its events, no event without its version.
        orphans = await conn.fetchval(
            "SELECT count(*) FROM ledger l WHERE NOT EXISTS (SELECT 1 FROM audit_events e "
            "WHERE e.object_kind = l.kind AND e.object_id = l.object_id "
            "AND e.version_after = l.version)"
        )
        dangling = await conn.fetchval(
            "SELECT count(*) FROM audit_events e WHERE NOT EXISTS "
            "(SELECT 1 FROM ledger l WHERE l.kind = e.object_kind AND l.object_id = e.object_id "
            "AND l.version = e.version_after)"
        )
    assert [(e["kind"], e["version_before"], e["version_after"]) for e in events] == [
        ("sr_ingested", None, 1),
        ("sr_updated", 1, 2),
        ("property_added", 2, 3),
        ("property_added", 2, 3),
        ("property_removed", 3, 4),
    ]
    at = {e["version"]: e["at"] for e in entries}
    assert all(e["at"] == at[e["version_after"]] for e in events)
    assert orphans == 0
    assert dangling == 0


async def test_projections_equal_a_rebuild_from_the_ledger(gateway: Gateway) -> None:
    await write_history(gateway)
    report = await verify_report(gateway.database_url)
    assert report.ok, report.problems
    async with sql(gateway.database_url) as conn:
        assert report.records == await conn.fetchval("SELECT count(*) FROM records")
        assert report.entries == await conn.fetchval("SELECT count(*) FROM ledger")
        assert report.memberships == await conn.fetchval("SELECT count(*) FROM edge_properties")
    assert report.records >= 1
    assert report.entries > report.records


# -- tampering ----------------------------------------------------------------------


@pytest.fixture(scope="module")
async def history_db(databases: Databases) -> tuple[str, str]:
    """A database holding one four-version record, written through a gateway and left idle.

    It is not started through start_gateway: the tests below tamper with copies of it,
    and those copies must not be verified at teardown.
    """
    url = await databases.create()
    async with run_gateway(
        Settings(database_url=url, anonymous_agent="dev", pool_size=2)
    ) as gateway:
        rid = await write_history(gateway)
        await ingest(gateway, "a second record", ["org:Acme"])
    assert (await verify_report(url)).ok
    return url, rid


async def copy_of(databases: Databases, url: str) -> str:
    name = f"edgeloom_t_{uuid.uuid4().hex[:10]}"
    source = urlsplit(plain(url)).path.lstrip("/")
    async with sql(databases.url) as admin:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    databases.created.append(name)
    return with_database(databases.url, name)


LEDGER_OFF = "ALTER TABLE ledger DISABLE TRIGGER ledger_append_only"

TAMPERING: dict[str, tuple[list[str], str]] = {
    "content rewritten": (
        [
            LEDGER_OFF,
            "UPDATE ledger SET state = jsonb_set(state, '{content}', '\"forged\"') "
            "WHERE object_id = $1 AND version = 2",
        ],
        "v2: hash does not match content",
    ),
    "actor rewritten": (
        [LEDGER_OFF, "UPDATE ledger SET actor = 'mallory' WHERE object_id = $1 AND version = 1"],
        "v1: hash does not match content",
    ),
    "chain cut": (
        [LEDGER_OFF, "UPDATE ledger SET prev_hash = NULL WHERE object_id = $1 AND version = 3"],
        "v3: prev_hash breaks the chain",
    ),
    "entry deleted": (
        [LEDGER_OFF, "DELETE FROM ledger WHERE object_id = $1 AND version = 2"],
        "version 3 where 2 was expected",
    ),
    "projection content": (
        ["UPDATE records SET content = 'forged' WHERE id = $1"],
        "records.content differs from the ledger",
    ),
    "projection version": (
        ["UPDATE records SET version = 3 WHERE id = $1"],
        "records.version differs from the ledger",
    ),
    "record row deleted": (
        ["DELETE FROM edge_properties WHERE record_id = $1", "DELETE FROM records WHERE id = $1"],
        "in the ledger but missing from records",
    ),
    "membership deleted": (
        ["DELETE FROM edge_properties WHERE record_id = $1 AND label = 'person'"],
        "membership person:Sarah missing from the projection",
    ),
    "membership forged": (
        [
            "INSERT INTO edge_properties (id, record_id, lane, label, value, recorded_from, "
            "from_version) SELECT 'ep_forged', id, lane, 'org', 'Evil', updated_at, version "
            "FROM records WHERE id = $1"
        ],
        "membership org:Evil not in the ledger",
    ),
    "membership history moved": (
        [
            "UPDATE edge_properties SET recorded_to = recorded_to + interval '1 day' "
            "WHERE record_id = $1 AND label = 'topic'"
        ],
        "membership topic:renewal",
    ),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
async def test_verify_reports_tampering(
    databases: Databases, history_db: tuple[str, str], case: str
) -> None:
    source, rid = history_db
    url = await copy_of(databases, source)
    assert (await verify_report(url)).ok
    statements, problem = TAMPERING[case]
    async with sql(url) as conn:
        for statement in statements:
            if "$1" in statement:
                await conn.execute(statement, rid)
            else:
                await conn.execute(statement)
    report = await verify_report(url)
    assert not report.ok
    assert any(problem in line for line in report.problems), report.problems
    assert all(rid in line for line in report.problems), report.problems


async def test_postgres_refuses_to_truncate_the_ledger(
    databases: Databases, history_db: tuple[str, str]
) -> None:
    # On a copy: should the refusal ever regress, no other test loses its data.
    url = await copy_of(databases, history_db[0])
    async with sql(url) as conn:
        count = await conn.fetchval("SELECT count(*) FROM ledger")
        for table in ("ledger", "policy_versions", "audit_events", "checkpoints"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await conn.execute(f"TRUNCATE {table} CASCADE")
        assert await conn.fetchval("SELECT count(*) FROM ledger WHERE kind = 'record'") == 5
        assert await conn.fetchval("SELECT count(*) FROM ledger") == count
    assert (await verify_report(url)).ok


async def test_verify_reports_a_record_without_a_ledger(
    databases: Databases, history_db: tuple[str, str]
) -> None:
    source, _ = history_db
    url = await copy_of(databases, source)
    ghost = "sr_" + "9" * 32
    async with sql(url) as conn:
        await conn.execute(
            "INSERT INTO records (id, lane, source_type, authority, content, properties, "
            "version, created_at, updated_at, created_by, ledger_hash) "
            "SELECT $1, lane, source_type, authority, content, properties, version, "
            "created_at, updated_at, created_by, ledger_hash FROM records LIMIT 1",
            ghost,
        )
    report = await verify_report(url)
    assert report.problems == [f"{ghost}: in records but has no ledger entry"]


# -- audit events against their entries --------------------------------------------

EVENTS_OFF = "ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only"

# Each edits one column of one event of the four-version record; (version_after, the
# event's kind, the assignment, what verify must say).
EVENT_TAMPERING: dict[str, tuple[int, str, str, str]] = {
    "actor": (1, "sr_ingested", "actor = 'mallory'", "actor is 'mallory'; the entry's is 'dev'"),
    "time": (2, "sr_updated", "at = at + interval '1 hour'", "at is "),
    "lane": (2, "sr_updated", "lane = 'private'", "lane is 'private'; the entry's is 'default'"),
    "record": (3, "property_added", "record_id = 'sr_" + "0" * 32 + "'", "record_id is 'sr_0"),
    "version before": (3, "property_added", "version_before = 1", "version_before is 1"),
    "kind": (2, "sr_updated", "kind = 'sr_ingested'", "kind is 'sr_ingested', which the entry"),
    "payload": (
        2,
        "sr_updated",
        "payload = jsonb_set(payload, '{contentChanged}', 'false')",
        "payload field 'contentChanged' is False; the entry implies True",
    ),
    "payload field added": (
        4,
        "property_removed",
        'payload = payload || \'{"by": "mallory"}\'',
        "payload field 'by' is 'mallory'; the entry implies none",
    ),
    "payload value": (
        1,
        "sr_ingested",
        "payload = jsonb_set(payload, '{properties}', '[\"org:Evil\"]')",
        "payload field 'properties' is ['org:Evil']; the entry implies ['org:Acme', "
        "'topic:renewal']",
    ),
}


@pytest.mark.parametrize("case", sorted(EVENT_TAMPERING))
async def test_verify_reports_an_edited_audit_event(
    databases: Databases, history_db: tuple[str, str], case: str
) -> None:
    source, rid = history_db
    url = await copy_of(databases, source)
    version, kind, assignment, problem = EVENT_TAMPERING[case]
    async with sql(url) as conn:
        await conn.execute(EVENTS_OFF)
        seq = await conn.fetchval(
            f"UPDATE audit_events SET {assignment} WHERE seq = (SELECT min(seq) FROM "
            "audit_events WHERE object_id = $1 AND version_after = $2 AND kind = $3) "
            "RETURNING seq",
            rid,
            version,
            kind,
        )
    assert seq is not None
    report = await verify_report(url)
    assert any(
        line.startswith(f"event {seq} ({rid} v{version}): {problem}") for line in report.problems
    ), report.problems


async def test_verify_checks_event_fields_that_name_other_records(databases: Databases) -> None:
    url = await databases.create()
    async with run_gateway(
        Settings(database_url=url, anonymous_agent="dev", pool_size=2)
    ) as gateway:
        ids = [(await ingest(gateway, f"r{n}", ["org:Acme"]))["id"] for n in range(4)]
        await connect(gateway, ids[0], ids[1])
        await group(gateway, ids[1:4])
        grouped = await group(gateway, ids[0:2])
        await gateway.data(UNGROUP, {"id": grouped["id"]})
        await ingest(gateway, "adjusts r2", [], adjusts=[ids[2]])
    assert (await verify_report(url)).ok
    edits = {
        ("connected", ids[0]): (
            "payload = jsonb_set(payload, '{other}', to_jsonb($2::text))",
            ids[3],
        ),
        ("grouped", ids[2]): ("payload = jsonb_set(payload, '{members}', '2')", None),
        ("ungrouped", ids[0]): ("payload = jsonb_set(payload, '{dissolved}', '\"no\"')", None),
        ("adjusted", ids[2]): (
            "payload = jsonb_set(payload, '{adjustedBy}', to_jsonb($2::text))",
            ids[3],
        ),
    }
    expected = {
        "connected": f"payload field 'other' is '{ids[3]}'; the entries imply '{ids[1]}'",
        "grouped": "payload field 'members' is 2; the entries imply 3",
        "ungrouped": "payload field 'dissolved' is 'no'",
        "adjusted": f"payload field 'adjustedBy' is '{ids[3]}', which is no record first written",
    }
    async with sql(url) as conn:
        await conn.execute(EVENTS_OFF)
        for (kind, rid), (assignment, value) in edits.items():
            args = [rid] if value is None else [rid, value]
            await conn.execute(
                f"UPDATE audit_events SET {assignment} WHERE seq = (SELECT min(seq) FROM "
                f"audit_events WHERE object_id = $1 AND kind = '{kind}')",
                *args,
            )
    report = await verify_report(url)
    for kind, text in expected.items():
        assert sum(text in line for line in report.problems) == 1, (kind, report.problems)
    assert len(report.problems) == 4, report.problems
