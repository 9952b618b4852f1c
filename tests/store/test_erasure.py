"""Erasure (eraseRecord): the content leaves every table, index, feed payload and export,
and the ledger still verifies, on entries of hash format 3 and of format 2 alike."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from policies.errors import EraseForbiddenError
from store.errors import AlreadyErasedError, NotFoundError, NotRestorableError
from store.kinds.correction.commands import Correct
from store.kinds.edge.commands import UpsertEdge
from store.kinds.policy.in_force import PolicyCache
from store.kinds.record.commands import Ingest, NewRecord, Update
from store.kinds.record.embedding import pack
from store.kinds.record.erase import EraseRecord
from store.kinds.record.model import Record
from store.kinds.record.retire import RestoreRecord
from store.ledger import append
from store.ledger.executor import Executor
from store.operations.roles import runtime_url
from store.operations.verify import verify
from store.pool import create_pool
from tests.conftest import GatewayFactory
from tests.support import Databases, Gateway, sql
from tests.test_cli import edgeloom

POLICY = """
lanes:
  people:
    embedding: { dimensions: 3, model: test-model }
  shared: { properties_personal: false }
agents:
  dpo: { read: ["*"], write: ["*"], erase: true }
  writer: { read: ["*"], write: ["*"] }
  outsider: { read: [shared], write: [shared] }
"""


@pytest.fixture(scope="module")
async def gateway(start_gateway: GatewayFactory) -> Gateway:
    return await start_gateway(policy_yaml=POLICY)


@asynccontextmanager
async def executor_at(database_url: str) -> AsyncIterator[Executor]:
    pool = await create_pool(runtime_url(database_url), 4)
    try:
        yield Executor(pool, PolicyCache.empty())
    finally:
        await pool.close()


async def write_person(executor: Executor, marker: str, lane: str = "people") -> tuple[str, str]:
    """A record holding `marker` in its content (twice, across versions), its tags, an edge
    property, metadata and a vector, a typed edge to another record quoting it and a
    correction of it; its id and the other record's."""
    vector = pack([0.1, 0.2, 0.3]) if lane == "people" else None
    [records] = [
        await executor.execute(
            "writer",
            Ingest(
                (
                    NewRecord(
                        f"{marker} lives at 12 Elm Street #{marker}",
                        (f"person:{marker}",),
                        lane=lane,
                        metadata=(f"title:{marker} notes",),
                        embedding=vector,
                    ),
                    NewRecord("the other record", lane=lane),
                )
            ),
        )
    ]
    person, other = (r.id for r in records if isinstance(r, Record))
    await executor.execute("writer", Update(person, f"{marker} moved to 3 Oak Road"))
    quote = {"quote": f"{marker} lives at", "source": "notes.md", "offset": 0}
    await executor.execute("writer", UpsertEdge(person, other, "mentions", evidence=quote))
    await executor.execute("writer", Correct(person, f"{marker} moved again", f"{marker} called"))
    return person, other


async def tables_holding(database_url: str, marker: str) -> list[str]:
    """Every column of every table (as text) holding `marker`, after VACUUM FULL (so no
    dead tuple keeps it) and ANALYZE (so no statistic does), and the statistics too."""
    found = []
    async with sql(database_url) as conn:
        await conn.execute("VACUUM FULL")
        await conn.execute("ANALYZE")
        columns = await conn.fetch(
            """SELECT c.table_name, c.column_name FROM information_schema.columns c
            JOIN information_schema.tables t USING (table_schema, table_name)
            WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
            ORDER BY 1, 2"""
        )
        for table, column in columns:
            hit = await conn.fetchval(
                f'SELECT count(*) FROM "{table}" WHERE position($1 in lower("{column}"::text)) > 0',
                marker.lower(),
            )
            if hit:
                found.append(f"{table}.{column}")
        stats = await conn.fetch(
            """SELECT tablename, attname FROM pg_stats WHERE schemaname = 'public'
            AND position($1 in lower(concat(most_common_vals::text, histogram_bounds::text)))
                > 0""",
            marker.lower(),
        )
        found += [f"pg_stats {r['tablename']}.{r['attname']}" for r in stats]
    return found


async def test_an_erasure_leaves_no_byte_of_the_content_and_verify_holds(
    gateway: Gateway,
) -> None:
    marker = "Zqxmarkerone"
    async with executor_at(gateway.database_url) as executor:
        person, other = await write_person(executor, marker)
        assert await tables_holding(gateway.database_url, marker)
        erased = await executor.execute("dpo", EraseRecord(person, "the person asked"))
    assert erased.state.content == "" and erased.retirement is not None
    assert await tables_holding(gateway.database_url, marker) == []
    report = await verify(gateway.database_url)
    assert report.ok, report.problems
    assert f"{person} v1: erased by record:{person}:3 (hash recomputed)" in report.erased
    assert any(e.startswith("edge ") and "hash recomputed" in e for e in report.erased)
    async with sql(gateway.database_url) as conn:
        entry = await conn.fetchrow(
            "SELECT actor, policy_version, (state->'erased')::text AS erased, hash_format "
            "FROM ledger "
            "WHERE kind = 'record' AND object_id = $1 AND event = 'sr_erased'",
            person,
        )
        payloads = await conn.fetch(
            "SELECT kind, payload FROM audit_events WHERE object_id = $1 ORDER BY seq", person
        )
        edge_payloads = await conn.fetch(
            "SELECT e.payload::text FROM audit_events e JOIN ledger l ON l.kind = 'edge' "
            "AND l.object_id = e.object_id AND l.version = e.version_after "
            "WHERE l.state->>'from_id' = $1 AND l.erased_by IS NOT NULL",
            person,
        )
        vectors = await conn.fetchval(
            "SELECT count(*) FROM record_vectors WHERE record_id = $1", person
        )
        names = await conn.fetchval(
            "SELECT count(*) FROM edge_properties WHERE record_id = $1", person
        )
    # Who, when (its entry's), why, under which policy, and what it erased with its hashes.
    assert entry["actor"] == "dpo" and entry["policy_version"] >= 1 and entry["hash_format"] == 3
    erasure = json.loads(entry["erased"])
    assert erasure["reason"] == "the person asked"
    listed = sorted((e["kind"], e["version"]) for e in erasure["entries"])
    assert listed == [("correction", 1), ("edge", 1), ("record", 1), ("record", 2)]
    said = [(p["kind"], json.loads(p["payload"])) for p in payloads]
    assert [p for _, p in said[:-1]] == [{"erased": f"record:{person}:3"}] * (len(said) - 1)
    assert said[-1] == ("sr_erased", {"reason": "the person asked"})
    # An edge's erased event still names its second lane: the feed shows it only to a
    # reader of both.
    assert [json.loads(p["payload"]) for p in edge_payloads] == [
        {"erased": f"record:{person}:3", "toLane": "people"}
    ]
    assert vectors == 0 and names == 0
    assert other


async def test_refusals_name_what_is_allowed(gateway: Gateway) -> None:
    async with executor_at(gateway.database_url) as executor:
        person, _ = await write_person(executor, "Zqxmarkertwo")
        with pytest.raises(EraseForbiddenError) as forbidden:
            await executor.execute("writer", EraseRecord(person, "no right"))
        assert "the profiles the policy names for erasure (erase: true): ['dpo']" in str(
            forbidden.value
        )
        # A record the caller may not read answers exactly as a missing one.
        with pytest.raises(NotFoundError) as unreadable:
            await executor.execute("outsider", EraseRecord(person, "hidden"))
        missing_id = "sr_" + "0" * 26
        with pytest.raises(NotFoundError) as missing:
            await executor.execute("outsider", EraseRecord(missing_id, "hidden"))
        assert str(unreadable.value).replace(person, "X") == str(missing.value).replace(
            missing_id, "X"
        )
        await executor.execute("dpo", EraseRecord(person, "first"))
        with pytest.raises(AlreadyErasedError) as twice:
            await executor.execute("dpo", EraseRecord(person, "second"))
        assert twice.value.code == "CONFLICT"
        assert "by dpo (reason: first)" in str(twice.value)
        with pytest.raises(NotRestorableError):
            await executor.execute("dpo", RestoreRecord(person))
    report = await verify(gateway.database_url)
    assert report.ok, report.problems


async def test_a_lane_whose_properties_are_not_personal_keeps_them(gateway: Gateway) -> None:
    async with executor_at(gateway.database_url) as executor:
        person, _ = await write_person(executor, "Zqxmarkerthree", lane="shared")
        await executor.execute("dpo", EraseRecord(person, "kept"))
    async with sql(gateway.database_url) as conn:
        states = [
            json.loads(row["state"])
            for row in await conn.fetch(
                "SELECT state::text FROM ledger WHERE kind = 'record' AND object_id = $1 "
                "ORDER BY version",
                person,
            )
        ]
    # The content is gone from every version; the edge property stays, metadata does not.
    assert [s["content"] for s in states] == ["", "", ""]
    assert all(["person", "Zqxmarkerthree"] in s["properties"] for s in states)
    assert not any(p[0].startswith("_meta_") for s in states for p in s["properties"])
    report = await verify(gateway.database_url)
    assert report.ok, report.problems


async def test_entries_of_hash_format_2_are_attested_and_checkpoints_still_verify(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = tmp_path / "key.pem"
    async with executor_at(gateway.database_url) as executor:
        monkeypatch.setattr(append, "WRITE_FORMAT", 2)
        person, _ = await write_person(executor, "Zqxmarkerfour")
        monkeypatch.setattr(append, "WRITE_FORMAT", 3)
        await checkpoint(gateway.database_url, key)
        await executor.execute("dpo", EraseRecord(person, "old entries"))
    async with sql(gateway.database_url) as conn:
        formats = await conn.fetch(
            "SELECT version, hash_format FROM ledger WHERE object_id = $1 ORDER BY version",
            person,
        )
    assert [f["hash_format"] for f in formats] == [2, 2, 3]
    assert await tables_holding(gateway.database_url, "Zqxmarkerfour") == []
    await checkpoint(gateway.database_url, key)
    status, out, err = await edgeloom(gateway.database_url, "verify", "--checkpoint-key", str(key))
    assert status == 0, (out, err)
    assert f"{person} v2: erased by record:{person}:3 (hash attested)" in out.splitlines()
    assert "verify ok: " in out and " of them erased, " in out


async def checkpoint(url: str, key: Path) -> None:
    status, out, err = await edgeloom(url, "checkpoint", "--checkpoint-key", str(key))
    assert status == 0, (out, err)


async def test_a_forged_erasure_is_caught(gateway: Gateway) -> None:
    """Content removed by an owner without an erasure entry (the triggers switched off):
    verify names the entry, whether or not the forger also says it was erased."""
    async with executor_at(gateway.database_url) as executor:
        person, _ = await write_person(executor, "Zqxmarkerfive")
    where = "kind = 'record' AND object_id = $1 AND version = 1"
    async with sql(gateway.database_url) as conn:
        original = await conn.fetchval(f"SELECT state FROM ledger WHERE {where}", person)

        async def forge(erased_by: str | None) -> list[str]:
            await conn.execute("ALTER TABLE ledger DISABLE TRIGGER ledger_append_only")
            await conn.execute(
                f"UPDATE ledger SET state = jsonb_set(state, '{{content}}', '\"\"'), "
                f"erased_by = $2 WHERE {where}",
                person,
                erased_by,
            )
            await conn.execute("ALTER TABLE ledger ENABLE TRIGGER ledger_append_only")
            return (await verify(gateway.database_url)).problems

        silent = await forge(None)
        claimed = await forge(f"record:{person}:9")
        await conn.execute("ALTER TABLE ledger DISABLE TRIGGER ledger_append_only")
        await conn.execute(
            f"UPDATE ledger SET state = $2, erased_by = NULL WHERE {where}", person, original
        )
        await conn.execute("ALTER TABLE ledger ENABLE TRIGGER ledger_append_only")
    assert f"{person} v1: hash does not match content" in silent
    assert any(
        p.startswith(f"{person} v1: says it was erased by record:{person}:9, but no such")
        for p in claimed
    ), claimed


async def test_the_gateway_cannot_rewrite_history_but_through_an_erasure(
    gateway: Gateway,
) -> None:
    async with executor_at(gateway.database_url) as executor:
        person, _ = await write_person(executor, "Zqxmarkersix")
    async with sql(runtime_url(gateway.database_url)) as conn:
        with pytest.raises(Exception, match="permission denied"):
            await conn.execute("UPDATE ledger SET state = '{}' WHERE object_id = $1", person)
        # The function refuses without an erasure entry of the same transaction.
        with pytest.raises(Exception, match="no erasure"):
            await conn.execute(
                "SELECT edgeloom_erase($1, $2, '[]'::jsonb)", f"record:{person}:3", person
            )
    async with sql(gateway.database_url) as conn:
        # Even its owner, triggers on, cannot change an entry no erasure names.
        with pytest.raises(Exception, match="append-only"):
            await conn.execute(
                "UPDATE ledger SET state = '{}', erased_by = 'record:x:1' WHERE object_id = $1",
                person,
            )


async def test_exports_after_an_erasure_hold_none_of_it_and_replaying_it_matches(
    start_gateway: GatewayFactory, databases: Databases, tmp_path: Path
) -> None:
    # A gateway of its own: its exports hold no checkpoint signed by another test's key.
    gateway = await start_gateway(policy_yaml=POLICY)
    marker = "Zqxmarkerseven"
    before, after = tmp_path / "before.jsonl.gz", tmp_path / "after.jsonl.gz"
    async with executor_at(gateway.database_url) as executor:
        person, _ = await write_person(executor, marker)
        status, out, err = await edgeloom(gateway.database_url, "export", str(before))
        assert status == 0, (out, err)
        await executor.execute("dpo", EraseRecord(person, "replayed"))
    status, out, err = await edgeloom(gateway.database_url, "export", str(after))
    assert status == 0, (out, err)
    assert marker.lower().encode() not in gzip.decompress(after.read_bytes()).lower()
    # The export after imports and verifies.
    target = await databases.create()
    status, out, err = await edgeloom(
        target, "import", str(after), "--checkpoint-key", str(tmp_path / "target.pem")
    )
    assert status == 0, (out, err)
    report = await verify(target)
    assert report.ok, report.problems
    assert await tables_holding(target, marker) == []
    # The export before, imported, then the same erasure: the same state.
    replay = await databases.create()
    status, out, err = await edgeloom(
        replay, "import", str(before), "--checkpoint-key", str(tmp_path / "replay.pem")
    )
    assert status == 0, (out, err)
    async with executor_at(replay) as executor:
        await executor.execute("dpo", EraseRecord(person, "replayed"))
    report = await verify(replay)
    assert report.ok, report.problems
    assert await tables_holding(replay, marker) == []
    assert await erased_state(replay, person) == await erased_state(gateway.database_url, person)


async def erased_state(url: str, person: str) -> Sequence[Any]:
    """What an erasure leaves of a record and what hangs off it, time of the erasure aside."""
    async with sql(url) as conn:
        entries = await conn.fetch(
            "SELECT kind, object_id, version, state, hash, erased_by FROM ledger "
            "WHERE (object_id = $1 OR state->>'from_id' = $1) "
            "AND (erased_by IS NOT NULL OR event = 'sr_erased') "
            "ORDER BY kind, object_id, version",
            person,
        )
        record = await conn.fetchrow(
            "SELECT content, properties, retired_reason FROM records WHERE id = $1", person
        )
        words = await conn.fetch(
            "SELECT from_version, words::text FROM record_words WHERE record_id = $1 ORDER BY 1",
            person,
        )
        payloads = await conn.fetch(
            "SELECT kind, payload FROM audit_events WHERE object_id = $1 ORDER BY seq", person
        )
    # The entries it erased and the erasure entry's state (what the erasure's transaction
    # wrote besides holds its time: the erasure's own hash, the retirement of its edges).
    return [
        [
            (*(e[k] for k in ("kind", "object_id", "version", "state", "erased_by")),)
            for e in entries
        ],
        [e["hash"] for e in entries if e["erased_by"] is not None],
        tuple(record),
        [tuple(w) for w in words],
        [tuple(p) for p in payloads],
    ]
