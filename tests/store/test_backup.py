"""Export and import: a portable file that rebuilds the same memory, answers included."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import time
import tracemalloc
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from gql.api.limits import DEFAULT_MAX_BODY
from gql.server.settings import Settings
from policies.properties import MAX_VALUE_LENGTH
from store.ledger.hashing import written_hash
from store.limits import MAX_CONTENT_CHARS
from store.operations import backup, signing
from tests.gql._api import ADD, GATHER, REMOVE, RESTORE_RECORD, RETIRE_RECORD, UPDATE, ingest
from tests.gql._asserted import CORRECT, asserted, connect, group
from tests.gql._edges import CONFLICTS, EDGES, RESOLVE, RETIRE, upsert
from tests.support import Databases, Gateway, run_gateway, sql
from tests.test_cli import edgeloom

HISTORY = """
query($id: ID!, $asOf: DateTime) {
  record(id: $id, asOf: $asOf) {
    id lane sourceType authority content version createdAt updatedAt createdBy properties
    versions { number at event actor content properties policyVersion hash }
  }
}
"""
AUDIT = """
query($after: String) { audit(first: 500, after: $after) {
  totalCount items { id cursor kind recordId lane actor at payload } } }
"""


async def write_memory(gateway: Gateway) -> list[dict[str, Any]]:
    """Records with histories, removals and an idempotency key."""
    written = []
    for n in range(12):
        record = await ingest(
            gateway, f"note {n}", [f"org:Org{n % 3}", "topic:renewal"], idempotencyKey=f"k{n}"
        )
        if n % 2:
            await gateway.data(UPDATE, {"id": record["id"], "content": f"note {n}, revised"})
        if n % 3 == 0:
            await gateway.data(ADD, {"id": record["id"], "properties": ["person:Sam"]})
            await gateway.data(REMOVE, {"id": record["id"], "labels": ["topic"]})
        written.append(record)
    # The asserted edges and corrections are ledgered too.
    await connect(gateway, written[0]["id"], written[1]["id"])
    await group(gateway, [r["id"] for r in written[2:5]])
    await gateway.data(CORRECT, {"id": written[5]["id"], "content": "fixed", "reason": "typo"})
    written.append(
        await ingest(gateway, "adjusts note 6", ["org:Org0"], adjusts=[written[6]["id"]])
    )
    # Typed edges: updated, resolved and retired, so each has several versions.
    a, b, c = (r["id"] for r in written[7:10])
    quote = {"quote": "note 7", "source": "notes.md", "offset": 0}
    made = await upsert(gateway, fromId=a, toId=b, type="supports", weight=0.5, evidence=quote)
    await upsert(gateway, fromId=a, toId=b, type="supports", weight=0.75)
    conflict = await upsert(gateway, fromId=b, toId=c, type="contradicts")
    await gateway.data(
        RESOLVE,
        {"edgeId": conflict["id"], "resolution": "SUPERSEDED", "resolver": "x", "winnerId": c},
    )
    await gateway.data(RETIRE, {"id": made["id"]})
    # A retired record, and one retired and restored: tombstones are entries like any other.
    await gateway.data(RETIRE_RECORD, {"id": written[10]["id"], "reason": "wrong"})
    await gateway.data(RETIRE_RECORD, {"id": written[11]["id"]})
    await gateway.data(RESTORE_RECORD, {"id": written[11]["id"]})
    return written


async def answers(gateway: Gateway, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything a client could ask of these records, now and at every past instant."""
    seen: dict[str, Any] = {}
    for record in records:
        # A retired record is refused saying so: the refusal is part of the answer.
        now = await gateway.post(HISTORY, {"id": record["id"]})
        seen[record["id"]] = now
        shown = now["data"]["record"]
        for version in shown["versions"] if shown else ():
            seen[f"{record['id']}@{version['at']}"] = await gateway.post(
                HISTORY, {"id": record["id"], "asOf": version["at"]}
            )
    for match in (["topic:renewal"], ["org:Org1", "topic:renewal"], ["person:Sam"]):
        for mode in ("INTERSECT", "UNION", "TIMELINE"):
            seen[f"{match}/{mode}"] = await gateway.data(GATHER, {"match": match, "mode": mode})
    for record in records:
        if seen[record["id"]]["data"]["record"] is not None:
            seen[f"{record['id']}/asserted"] = await asserted(gateway, record["id"])
    seen["labels"] = await gateway.data("{ labels { label recordCount } }")
    everything = await gateway.data(EDGES, {"includeExpired": True, "first": 500})
    seen["edges"] = everything
    for edge in everything["edges"]["items"]:
        for at in (edge["createdAt"], edge["updatedAt"]):
            seen[f"{edge['id']}@{at}"] = await gateway.data(
                EDGES, {"fromId": edge["fromId"], "asOf": at, "includeExpired": True}
            )
    seen["conflicts"] = await gateway.data(CONFLICTS, {"status": "ALL"})
    seen["audit"] = await gateway.data(AUDIT)
    return seen


@pytest.mark.over10s("edgeloom export and import as processes, and verify of the rebuilt memory")
async def test_export_then_import_rebuilds_the_same_memory(
    databases: Databases, tmp_path: Path
) -> None:
    source = await databases.create()
    target = await databases.create()
    dump = tmp_path / "memory.jsonl.gz"
    settings = {"anonymous_agent": "dev", "pool_size": 2, "checkpoint_seconds": 0}
    async with run_gateway(Settings(database_url=source, **settings)) as gateway:
        records = await write_memory(gateway)
        status, out, err = await edgeloom(source, "checkpoint")
        assert status == 0, (out, err)
        await gateway.data(UPDATE, {"id": records[0]["id"], "content": "after the checkpoint"})
        before = await answers(gateway, records)
        assert before["edges"]["edges"]["totalCount"] == 2

        # Exporting while writers run gives one consistent snapshot.
        async def writer() -> None:
            for n in range(20):
                await ingest(gateway, f"during export {n}", ["org:Busy"])

        busy = asyncio.create_task(writer())
        status, out, err = await edgeloom(source, "export", str(dump))
        await busy
        assert status == 0, (out, err)
        assert "export [" in err  # the progress bar
    with gzip.open(dump) as packed:
        lines = [json.loads(line) for line in packed]
    assert lines[0]["format"] == "edgeloom-export" and lines[-1]["t"] == "end"
    assert lines[-1]["signature"] and lines[-1]["sha256"]  # signed by the key it found
    exported = sum(1 for line in lines if line["t"] == "entry")
    events = sum(1 for line in lines if line["t"] == "event")
    async with sql(source) as conn:
        # Whatever the writers added, the file holds one moment: every entry with its events.
        assert exported + 0 == len(
            {(x["kind"], x["object_id"], x["version"]) for x in lines if x["t"] == "entry"}
        )
        assert events >= exported
        assert await conn.fetchval("SELECT count(*) FROM ledger") >= exported

    status, out, err = await edgeloom(target, "import", str(dump))
    assert status == 0, (out, err)
    assert "not checked" not in out  # every hash, chain, event and signature was
    status, out, err = await edgeloom(target, "verify")
    assert status == 0, (out, err)
    async with run_gateway(Settings(database_url=target, **settings)) as restored:
        after = await answers(restored, records)
        # A retry with a key the source saw returns the record it wrote, not a new one.
        again = await ingest(restored, "note 2", ["org:Org2", "topic:renewal"], idempotencyKey="k2")
        assert again["id"] == records[2]["id"]
    # The writers during the export added events after those `before` saw; the file holds
    # the ones its snapshot held, and the earlier ones exactly as they were.
    old, new = before.pop("audit")["audit"], after.pop("audit")["audit"]
    assert new["items"][: len(old["items"])] == old["items"]
    assert new["totalCount"] == events
    # Label counts likewise hold the records written during the export (org:Busy); verify
    # has checked them against the imported records.
    old_labels = {c["label"]: c["recordCount"] for c in before.pop("labels")["labels"]}
    new_labels = {c["label"]: c["recordCount"] for c in after.pop("labels")["labels"]}
    assert new_labels.pop("org") >= old_labels.pop("org")
    assert new_labels == old_labels
    assert after == before
    # Importing again, or into a database with data, is refused and changes nothing.
    status, out, err = await edgeloom(target, "import", str(dump))
    assert status == 2
    assert "the database is not empty" in err


async def test_a_truncated_export_imports_nothing(databases: Databases, tmp_path: Path) -> None:
    source = await databases.create()
    async with run_gateway(Settings(database_url=source, anonymous_agent="dev")) as gateway:
        await write_memory(gateway)
    dump = tmp_path / "memory.jsonl.gz"
    assert (await edgeloom(source, "export", str(dump)))[0] == 0
    with gzip.open(dump) as packed:
        raw = packed.read().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl.gz"
    with gzip.open(cut, "wb") as out:
        out.writelines(raw[: len(raw) // 2])
    target = await databases.create()
    status, out, err = await edgeloom(target, "import", str(cut))
    assert status == 2
    assert "the export is incomplete, so nothing was imported" in err
    async with sql(target) as conn:
        assert await conn.fetchval("SELECT count(*) FROM ledger") == 0


# -- what import checks before it commits -------------------------------------------


@pytest.fixture(scope="module")
async def signed_export(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """An export signed by its own key, with entries before and after its checkpoint."""
    folder = tmp_path_factory.mktemp("signed-export")
    key, dump = folder / "key.pem", folder / "memory.jsonl.gz"
    source = await databases.create()
    settings = Settings(database_url=source, anonymous_agent="dev", checkpoint_seconds=0)
    async with run_gateway(settings) as gateway:
        await write_memory(gateway)
        await anchor(source, key)
        await ingest(gateway, "after the checkpoint", ["org:Late"])
    status, out, err = await edgeloom(source, "export", str(dump), "--checkpoint-key", str(key))
    assert status == 0, (out, err)
    return dump, key


async def anchor(url: str, key: Path) -> None:
    """Take a checkpoint; it anchors nothing while a transaction older than the entries
    runs anywhere on the server (other tests' too), so try again for a while."""
    for _ in range(60):
        status, out, err = await edgeloom(url, "checkpoint", "--checkpoint-key", str(key))
        assert status == 0, (out, err)
        if out.startswith("checkpoint 1:"):
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"no checkpoint was taken: {out}")


def read_lines(dump: Path) -> list[dict[str, Any]]:
    with gzip.open(dump) as packed:
        return [json.loads(line) for line in packed]


def write_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    """The lines as an export, its digest recomputed as anyone can (not its signature)."""
    body = [orjson.dumps(line) + b"\n" for line in lines[:-1]]
    end = {**lines[-1], "sha256": hashlib.sha256(b"".join(body)).hexdigest()}
    with gzip.open(path, "wb") as out:
        out.writelines([*body, orjson.dumps(end) + b"\n"])
    return path


async def refused(databases: Databases, dump: Path, *args: str) -> tuple[str, str]:
    """Import `dump` into a new database: refused, and nothing imported."""
    target = await databases.create()
    status, out, err = await edgeloom(target, "import", str(dump), *args)
    assert status == 2, (out, err)
    assert "nothing was imported" in err, err
    async with sql(target) as conn:
        for table in ("ledger", "audit_events", "records", "checkpoints", "tokens"):
            assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 0, table
    return target, err


def entry_at(lines: list[dict[str, Any]], versions: int) -> int:
    """The index of the second entry of a record with at least `versions` entries."""
    for i, line in enumerate(lines):
        if line["t"] == "entry" and line["kind"] == "record" and line["version"] == 1:
            chain = [x for x in lines[i : i + versions] if x.get("object_id") == line["object_id"]]
            if len(chain) == versions:
                return i + 1
    raise AssertionError("no such record")


async def test_an_edited_entry_is_refused_at_its_line(
    databases: Databases, signed_export: tuple[Path, Path], tmp_path: Path
) -> None:
    dump, key = signed_export
    lines = read_lines(dump)
    at = entry_at(lines, 2)
    lines[at]["state"]["content"] = "forged"
    edited = write_lines(tmp_path / "edited.jsonl.gz", lines)
    rid = lines[at]["object_id"]
    for args in ([], ["--checkpoint-key", str(key)]):
        _, err = await refused(databases, edited, *args)
        assert f"line {at + 1}: {rid} v2: hash does not match content" in err


@pytest.mark.parametrize("how", ["version removed", "prev_hash rewritten"])
async def test_a_broken_chain_is_refused_at_its_line(
    databases: Databases, signed_export: tuple[Path, Path], tmp_path: Path, how: str
) -> None:
    dump, _ = signed_export
    lines = read_lines(dump)
    at = entry_at(lines, 3)
    rid = lines[at]["object_id"]
    if how == "version removed":
        del lines[at]
        lines[-1]["counts"]["entry"] -= 1
        expected = f"line {at + 1}: {rid}: version 3 where 2 was expected"
    else:
        # Its own hash recomputed: only the chain can tell.
        entry = lines[at]
        entry["prev_hash"] = "0" * 64
        entry["hash"] = written_hash(
            kind=entry["kind"],
            object_id=rid,
            version=entry["version"],
            event=entry["event"],
            actor=entry["actor"],
            at=datetime.fromisoformat(entry["at"]),
            policy_version=entry["policy_version"],
            state=entry["state"],
            prev_hash=entry["prev_hash"],
        )
        expected = f"line {at + 1}: {rid} v2: prev_hash breaks the chain"
    _, err = await refused(databases, write_lines(tmp_path / "cut.jsonl.gz", lines))
    assert expected in err


async def test_an_edited_event_is_refused_at_its_line(
    databases: Databases, signed_export: tuple[Path, Path], tmp_path: Path
) -> None:
    dump, _ = signed_export
    lines = read_lines(dump)
    at = next(i for i, x in enumerate(lines) if x["t"] == "event" and x["kind"] == "sr_updated")
    lines[at]["actor"] = "mallory"
    event = lines[at]
    _, err = await refused(databases, write_lines(tmp_path / "event.jsonl.gz", lines))
    assert (
        f"line {at + 1}: event {event['seq']} ({event['object_id']} v{event['version_after']}): "
        "actor is 'mallory'; the entry's is 'dev'"
    ) in err


async def test_a_rewritten_checkpoint_or_another_key_is_refused(
    databases: Databases, signed_export: tuple[Path, Path], tmp_path: Path
) -> None:
    dump, key = signed_export
    lines = read_lines(dump)
    at = next(i for i, x in enumerate(lines) if x["t"] == "checkpoint")
    other = tmp_path / "other.pem"
    signing.load_or_create(other, "elsewhere")
    # The file as exported, checked against a key that did not sign it.
    _, err = await refused(databases, dump, "--checkpoint-key", str(other))
    assert f"line {at + 1}: checkpoint 1: signed by key" in err
    lines[at]["entries"] -= 1
    _, err = await refused(databases, write_lines(tmp_path / "cp.jsonl.gz", lines))
    assert f"line {at + 1}: checkpoint 1: covers {lines[at]['entries']} entries" in err


async def test_a_forged_record_appended_is_refused_with_the_key(
    databases: Databases, signed_export: tuple[Path, Path], tmp_path: Path
) -> None:
    dump, key = signed_export
    lines = read_lines(dump)
    # A record cloned from a real one, with its own hash, chain and event made right,
    # after every entry the file's checkpoint covers.
    entries = [x for x in lines if x["t"] == "entry"]
    events = [x for x in lines if x["t"] == "event"]
    model = next(
        x
        for x in entries
        if x["kind"] == "record"
        and x["event"] == "sr_ingested"
        and not any(label.startswith("e_") for label, _ in x["state"]["properties"])
    )
    forged_id = "sr_" + "f" * 32
    forged = {**model, "object_id": forged_id, "seq": max(x["seq"] for x in entries) + 1}
    forged["hash"] = written_hash(
        kind="record",
        object_id=forged_id,
        version=1,
        event=forged["event"],
        actor=forged["actor"],
        at=datetime.fromisoformat(forged["at"]),
        policy_version=forged["policy_version"],
        state=forged["state"],
        prev_hash=None,
    )
    model_event = next(
        x for x in events if x["object_id"] == model["object_id"] and x["kind"] == "sr_ingested"
    )
    event = {
        **model_event,
        "id": "ae_forged",
        "seq": events[-1]["seq"] + 1,
        "record_id": forged_id,
        "object_id": forged_id,
    }
    last_entry = max(i for i, x in enumerate(lines) if x["t"] == "entry")
    lines.insert(last_entry + 1, forged)
    last_event = max(i for i, x in enumerate(lines) if x["t"] == "event")
    lines.insert(last_event + 1, event)
    lines[-1]["counts"]["entry"] += 1
    lines[-1]["counts"]["event"] += 1
    appended = write_lines(tmp_path / "appended.jsonl.gz", lines)

    _, err = await refused(databases, appended, "--checkpoint-key", str(key))
    assert f"line {len(lines)}: the file's signature does not match what it holds" in err
    # Without the key it is consistent with itself, and the import says what it could
    # not check.
    target = await databases.create()
    status, out, err = await edgeloom(
        target, "import", str(appended), "--checkpoint-key", str(tmp_path / "new.pem")
    )
    assert status == 0, (out, err)
    assert "not checked: no checkpoint key, so no signature was checked" in out


async def test_an_unsigned_export_is_refused_with_a_key(
    databases: Databases, signed_export: tuple[Path, Path], tmp_path: Path
) -> None:
    dump, key = signed_export
    lines = read_lines(dump)
    del lines[-1]["signature"]
    _, err = await refused(
        databases, write_lines(tmp_path / "unsigned.jsonl.gz", lines), "--checkpoint-key", str(key)
    )
    assert f"line {len(lines)}: the export is not signed" in err


def test_the_line_limit_holds_the_largest_record_entry() -> None:
    # Every character at its longest: content of control characters (6 bytes escaped),
    # labels and values (which hold none) of 4-byte UTF-8 characters.
    state = {
        "content": "\x01" * MAX_CONTENT_CHARS,
        "lane": "l" * 64,
        "source_type": "s" * 64,
        "authority": "a" * 64,
        "properties": [["\U0001d11e" * 128, "\U0001d11e" * MAX_VALUE_LENGTH]] * 256,
    }
    line = {
        "t": "entry",
        "seq": 2**62,
        "kind": "record",
        "object_id": "sr_" + "0" * 32,
        "version": 2**31 - 1,
        "event": "property_removed",
        "actor": "a" * 64,
        "at": "2026-12-01T14:00:00.000000+00:00",
        "policy_version": 2**31 - 1,
        "state": state,
        "prev_hash": "0" * 64,
        "hash": "0" * 64,
        "hash_format": 3,
        "state_sha256": "0" * 64,
        "erased_by": None,
    }
    assert len(orjson.dumps(line)) + 1 <= backup.RECORD_LINE_BYTES <= backup.MAX_LINE_BYTES
    # A policy version's YAML comes in one request body and is written no longer.
    assert backup.MAX_LINE_BYTES >= DEFAULT_MAX_BODY
    limits = (Path(__file__).parents[2] / "docs" / "security.md").read_text(encoding="utf-8")
    assert (
        f"| line of an export file (`import`) | {backup.MAX_LINE_BYTES // 2**20} MiB "
        f"({backup.MAX_LINE_BYTES:,} bytes): over twice the longest entry a record at every "
        f"limit makes ({backup.RECORD_LINE_BYTES:,} bytes,"
    ) in limits


async def test_a_gzip_bomb_line_is_refused_quickly(databases: Databases, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.jsonl.gz"
    header = {"t": "header", "format": "edgeloom-export", "version": 1, "counts": {}}
    chunk = b"a" * (1 << 20)
    with gzip.open(bomb, "wb", compresslevel=9) as out:
        out.write(orjson.dumps(header) + b'\n{"t": "entry", "x": "')
        for _ in range(512):  # one line of 512 MiB
            out.write(chunk)
        out.write(b'"}\n')
    assert bomb.stat().st_size < 1 << 20
    started = time.monotonic()
    _, err = await refused(databases, bomb)
    assert time.monotonic() - started < 20
    assert f"line 2 is longer than {backup.MAX_LINE_BYTES:,} bytes" in err
    # The reader holds at most one line's limit, whatever the line.
    tracemalloc.start()
    try:
        with pytest.raises(backup.BackupError, match="line 2 is longer than"):
            for _ in backup.read_lines(bomb):
                pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * backup.MAX_LINE_BYTES
