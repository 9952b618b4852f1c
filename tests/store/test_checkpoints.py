"""Checkpoints anchor all chains; verify checks them, the audit events, and every kind."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gql.server.settings import Settings
from store.kinds.record.word_counts import recount
from store.ledger.hashing import state_sha256, written_hash
from store.operations import checkpoints, signing
from store.operations.verify import verify
from store.pool import connect
from tests.gql._api import ADD, UPDATE, ingest
from tests.store.test_ledger import copy_of
from tests.support import Databases, Gateway, run_gateway, sql

LEDGER_OFF = "ALTER TABLE ledger DISABLE TRIGGER ledger_append_only"
EVENTS_OFF = "ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only"


async def take(url: str, signer: signing.Signer | None = None) -> checkpoints.Checkpoint | None:
    await settled(url)
    conn = await connect(url)
    try:
        return (await checkpoints.take(conn, signer)).made
    finally:
        await conn.close()


async def settled(url: str) -> None:
    """Wait until every ledger entry's transaction lies below the horizon, which writers
    in other databases of the same server hold back too (transaction ids are the server's)."""
    async with sql(url) as conn:
        for _ in range(1200):
            if await conn.fetchval(SETTLED):
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the horizon stayed behind the ledger's newest transaction for 60 s")


SETTLED = """
SELECT coalesce(max(txid::text::bigint), 0) < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
FROM ledger
"""


async def history(databases: Databases) -> tuple[str, str, str]:
    """A database with two records (one of three versions), anchored by a checkpoint."""
    url = await databases.create()
    async with run_gateway(
        Settings(database_url=url, anonymous_agent="dev", pool_size=2, checkpoint_seconds=0)
    ) as gateway:
        kept = (await ingest(gateway, "kept", ["org:Acme"]))["id"]
        erased = (await ingest(gateway, "to be erased", ["org:Acme"]))["id"]
        await gateway.data(UPDATE, {"id": erased, "content": "second"})
        await gateway.data(ADD, {"id": erased, "properties": ["topic:x"]})
    made = await take(url)
    assert made is not None and made.seq == 1 and made.entries == 5  # 4 records, 1 policy
    assert await take(url) is None  # nothing new to anchor
    return url, kept, erased


async def erase_record(url: str, rid: str) -> None:
    """What a database owner could do: remove a record's whole history consistently."""
    async with sql(url) as conn:
        await conn.execute(LEDGER_OFF)
        await conn.execute(EVENTS_OFF)
        await conn.execute("DELETE FROM ledger WHERE object_id = $1", rid)
        await conn.execute("DELETE FROM audit_events WHERE object_id = $1", rid)
        await conn.execute(
            "INSERT INTO label_deltas (lane, label, delta) SELECT DISTINCT lane, label, -1 "
            "FROM edge_properties WHERE record_id = $1 AND recorded_to IS NULL",
            rid,
        )
        await conn.execute(
            "INSERT INTO member_deltas (value_hash, label, lane, value, delta) "
            "SELECT edgeloom_member_hash(label, value_key), label, lane, value, -1 "
            "FROM edge_properties "
            "WHERE record_id = $1 AND recorded_to IS NULL",
            rid,
        )
        await conn.execute(
            "INSERT INTO record_deltas (lane, source_type, delta) "
            "SELECT lane, source_type, -1 FROM records WHERE id = $1",
            rid,
        )
        await conn.execute("DELETE FROM edge_properties WHERE record_id = $1", rid)
        await conn.execute("DELETE FROM record_words WHERE record_id = $1", rid)
        await conn.execute("DELETE FROM records WHERE id = $1", rid)
        # And counts the search statistics again from the words it left.
        await recount(conn)


async def test_checkpoints_chain_and_verify(databases: Databases) -> None:
    url, kept, _ = await history(databases)
    async with run_gateway(
        Settings(database_url=url, anonymous_agent="dev", pool_size=2, checkpoint_seconds=0)
    ) as gateway:
        await gateway.data(UPDATE, {"id": kept, "content": "later"})
    second = await take(url)
    assert second is not None and second.seq == 2 and second.entries == 1
    report = await verify(url)
    assert report.ok, report.problems
    assert report.checkpoints == 2


async def test_erasing_a_whole_history_before_a_checkpoint_is_detected(
    databases: Databases,
) -> None:
    url, _, erased = await history(databases)
    unanchored = await copy_of(databases, url)
    async with sql(unanchored) as conn:
        await conn.execute("ALTER TABLE checkpoints DISABLE TRIGGER checkpoints_append_only")
        await conn.execute("DELETE FROM checkpoints")
    # Without a checkpoint, a consistent erasure leaves nothing to compare against...
    await erase_record(unanchored, erased)
    assert (await verify(unanchored)).ok
    # ...with one, it is found.
    await erase_record(url, erased)
    report = await verify(url)
    assert not report.ok
    assert any("checkpoint 1" in p and "erased or rewritten" in p for p in report.problems)


async def test_rewriting_an_entry_with_recomputed_hashes_is_detected(
    databases: Databases,
) -> None:
    url, _, erased = await history(databases)
    async with sql(url) as conn:
        row = await conn.fetchrow(
            "SELECT * FROM ledger WHERE object_id = $1 AND version = 3", erased
        )
        state = json.loads(row["state"])
        state["content"] = "forged"
        forged = written_hash(
            kind="record",
            object_id=erased,
            version=3,
            event=row["event"],
            actor=row["actor"],
            at=row["at"],
            policy_version=row["policy_version"],
            state=state,
            prev_hash=row["prev_hash"],
        )
        await conn.execute(LEDGER_OFF)
        await conn.execute(
            "UPDATE ledger SET state = $2::jsonb, hash = $3, state_sha256 = $4 "
            "WHERE object_id = $1 AND version = 3",
            erased,
            json.dumps(state),
            forged,
            state_sha256(state),
        )
        await conn.execute(
            "UPDATE records SET content = 'forged', ledger_hash = $2 WHERE id = $1", erased, forged
        )
        # Version 3 only added a property; forged, it changes the words, so the owner
        # closes the words of version 2 there and indexes the forgery's.
        await conn.execute(
            "UPDATE record_words SET recorded_to = $2 WHERE record_id = $1 AND from_version = 2",
            erased,
            row["at"],
        )
        await conn.execute(
            "INSERT INTO record_words (record_id, from_version, lane, source_type, "
            "recorded_from, recorded_to, words) "
            "SELECT id, 3, lane, source_type, $2, NULL, "
            "to_tsvector(edgeloom_search_config(lane), 'forged') FROM records WHERE id = $1",
            erased,
            row["at"],
        )
        await recount(conn)
    report = await verify(url)
    # The chain and the projection agree with the forgery; only the checkpoint does not.
    assert len(report.problems) == 1, report.problems
    assert "checkpoint 1" in report.problems[0]


async def test_every_entry_has_its_events_and_every_event_its_entry(gateway: Gateway) -> None:
    rid = (await ingest(gateway, "audited", ["org:Acme"]))["id"]
    assert (await verify(gateway.database_url)).ok
    async with sql(gateway.database_url) as conn:
        await conn.execute(EVENTS_OFF)
        event = await conn.fetchrow("SELECT * FROM audit_events WHERE object_id = $1", rid)
        await conn.execute("DELETE FROM audit_events WHERE id = $1", event["id"])
        report = await verify(gateway.database_url)
        assert report.problems == [f"{rid} v1: record entry has no audit event"]
        await conn.execute(
            "INSERT INTO audit_events (id, kind, record_id, lane, actor, at, payload, "
            "version_before, version_after, object_kind, object_id) VALUES "
            "('ae_forged', 'sr_updated', $1, 'default', 'mallory', now(), '{}', 1, 2, "
            "'record', $1), ($2, $3, $1, $4, $5, $6, $7::jsonb, NULL, 1, 'record', $1)",
            rid,
            event["id"],
            event["kind"],
            event["lane"],
            event["actor"],
            event["at"],
            event["payload"],
        )
        report = await verify(gateway.database_url)
        assert report.problems == [
            f"{rid} v2: audit event ae_forged reports a record entry the ledger does not hold"
        ]
        await conn.execute("DELETE FROM audit_events WHERE id = 'ae_forged'")
        await conn.execute("ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only")
    assert (await verify(gateway.database_url)).ok


async def test_policy_versions_are_a_ledgered_kind_rebuilt_by_verify(gateway: Gateway) -> None:
    async with sql(gateway.database_url) as conn:
        entries = await conn.fetch(
            "SELECT object_id, version, event, actor FROM ledger WHERE kind = 'policy'"
        )
        assert [(e["object_id"], e["version"], e["event"]) for e in entries] == [
            ("policy", 1, "policy_applied")
        ]
        await conn.execute(
            "ALTER TABLE policy_versions DISABLE TRIGGER policy_versions_append_only"
        )
        await conn.execute("UPDATE policy_versions SET applied_by = 'mallory'")
        report = await verify(gateway.database_url)
        assert report.problems == ["policy_versions differs from the ledger's policy entries"]
        await conn.execute("UPDATE policy_versions SET applied_by = $1", entries[0]["actor"])
        await conn.execute("ALTER TABLE policy_versions ENABLE TRIGGER policy_versions_append_only")
    assert (await verify(gateway.database_url)).ok


async def test_signed_checkpoints_resist_an_owner_who_recomputes_every_hash(
    databases: Databases, tmp_path: Path
) -> None:
    url, _, erased = await history_unanchored(databases)
    signer = signing.load_or_create(tmp_path / "checkpoint-key.pem", signing.memory_of(url))
    assert (tmp_path / "checkpoint-key.pem").stat().st_mode & 0o777 == 0o600
    made = await take(url, signer)
    assert made is not None
    assert (await verify(url, signer)).ok
    # The owner erases a record and recomputes the checkpoint to match what is left...
    await erase_record(url, erased)
    async with sql(url) as conn:
        hashes = [r[0] for r in await conn.fetch("SELECT hash FROM ledger ORDER BY seq")]
        await conn.execute("ALTER TABLE checkpoints DISABLE TRIGGER checkpoints_append_only")
        await conn.execute(
            "UPDATE checkpoints SET entries = $1, hash = $2",
            len(hashes),
            checkpoints.chain(None, hashes),
        )
    assert (await verify(url)).ok  # without the key, nothing is left to disagree
    report = await verify(url, signer)
    assert report.problems == [
        "checkpoint 1: the signature does not match; it was forged",
        "checkpoint 1, recorded beside the key as signed, is missing or differs: "
        "checkpoints were removed or rewritten",
    ]
    # ...or removes the checkpoints altogether: the head kept beside the key says otherwise.
    async with sql(url) as conn:
        await conn.execute("DELETE FROM checkpoints")
    report = await verify(url, signer)
    assert report.problems == [
        "checkpoint 1, recorded beside the key as signed, is missing or differs: "
        "checkpoints were removed or rewritten"
    ]
    other = signing.load_or_create(tmp_path / "other.pem", signing.memory_of(url))
    assert other.key_id != signer.key_id


async def history_unanchored(databases: Databases) -> tuple[str, str, str]:
    url = await databases.create()
    async with run_gateway(
        Settings(database_url=url, anonymous_agent="dev", pool_size=2, checkpoint_seconds=0)
    ) as gateway:
        kept = (await ingest(gateway, "kept", ["org:Acme"]))["id"]
        erased = (await ingest(gateway, "to be erased", ["org:Acme"]))["id"]
    return url, kept, erased
