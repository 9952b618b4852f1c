"""What a database owner can do to checkpoints' ranges and fields, and what finds it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from gql.server.settings import Settings
from store.kinds.record.word_counts import recount
from store.operations import checkpoints, signing
from store.operations.checkpoints import Checkpoint, CheckpointError, Taken
from store.operations.signing import Signer
from store.operations.verify import verify
from store.pool import connect
from tests.gql._api import UPDATE, ingest
from tests.store.test_checkpoints import EVENTS_OFF, LEDGER_OFF, settled
from tests.support import Databases, run_gateway, sql
from tests.test_cli import edgeloom

CHECKPOINTS_OFF = "ALTER TABLE checkpoints DISABLE TRIGGER checkpoints_append_only"
NEWEST = "(SELECT max(seq) FROM checkpoints)"


def settings(url: str) -> Settings:
    return Settings(database_url=url, anonymous_agent="dev", pool_size=2, checkpoint_seconds=0)


async def take(url: str, signer: Signer | None = None, wait: bool = True) -> Taken:
    if wait:
        await settled(url)
    conn = await connect(url)
    try:
        return await checkpoints.take(conn, signer)
    finally:
        await conn.close()


async def write(url: str, *contents: str) -> list[str]:
    async with run_gateway(settings(url)) as gateway:
        return [(await ingest(gateway, content, ["org:Acme"]))["id"] for content in contents]


async def anchored(databases: Databases, tmp_path: Path) -> tuple[str, Signer]:
    """A database of two records and a policy, anchored by one signed checkpoint."""
    url = await databases.create()
    await write(url, "one", "two")
    signer = signing.load_or_create(tmp_path / "key.pem", signing.memory_of(url))
    made = (await take(url, signer)).made
    assert made is not None and made.entries == 3
    assert (await verify(url, signer)).ok
    return url, signer


async def positions(url: str, record_id: str) -> list[int]:
    async with sql(url) as conn:
        rows = await conn.fetch(
            "SELECT seq FROM ledger WHERE object_id = $1 ORDER BY seq", record_id
        )
    return [row["seq"] for row in rows]


async def test_a_range_moved_past_every_transaction_stops_checkpoints_loudly(
    databases: Databases, tmp_path: Path
) -> None:
    url, signer = await anchored(databases, tmp_path)
    async with sql(url) as conn:
        await conn.execute(CHECKPOINTS_OFF)
        await conn.execute(f"UPDATE checkpoints SET below_txid = '4000000000' WHERE seq = {NEWEST}")
    (written,) = await write(url, "after the change")
    # Not "nothing to anchor": no checkpoint can follow that one, and it says why.
    with pytest.raises(CheckpointError, match="below 4000000000, but none past .* its range"):
        await take(url, signer)
    (after,) = await positions(url, written)
    report = await verify(url)
    assert len(report.problems) == 2, report.problems
    assert report.problems[0].startswith(
        "checkpoint 1 claims to cover the transactions below 4000000000, but none past"
    )
    assert report.problems[1].startswith(f"ledger position {after}: no checkpoint covers it")
    # The range is signed: with the key, the change itself is named.
    assert (
        "checkpoint 1: the signature does not match; it was forged"
        in (await verify(url, signer)).problems
    )


async def test_a_range_moved_forward_leaves_entries_no_checkpoint_covers(
    databases: Databases, tmp_path: Path
) -> None:
    url, _ = await anchored(databases, tmp_path)
    (skipped,) = await write(url, "written before the range was moved")
    await settled(url)
    async with sql(url) as conn:
        await conn.execute(CHECKPOINTS_OFF)
        await conn.execute(
            "UPDATE checkpoints SET below_txid = pg_snapshot_xmin(pg_current_snapshot()) "
            f"WHERE seq = {NEWEST}"
        )
    (seq,) = await positions(url, skipped)
    expected = (
        f"ledger position {seq}: no checkpoint covers it, though its transaction is older "
        "than checkpoint 1's range: it was inserted into history after that range was anchored"
    )
    assert (await verify(url)).problems == [expected]
    # The next checkpoint anchors what is new and names what it cannot anchor.
    await write(url, "written after")
    taken = await take(url)
    assert taken.made is not None and taken.made.entries == 1
    assert taken.strays == (seq,)
    assert f"(positions {seq}) are older than the newest checkpoint's range" in taken.warnings()[0]
    # So a rewrite of the skipped entry stays visible: it is not anchored, and said so.
    assert (await verify(url)).problems == [expected.replace("checkpoint 1's", "checkpoint 2's")]


async def test_an_entry_given_an_older_transaction_is_covered_by_no_checkpoint(
    databases: Databases, tmp_path: Path
) -> None:
    url, signer = await anchored(databases, tmp_path)
    (late,) = await write(url, "slipped into the past")
    (seq,) = await positions(url, late)
    async with sql(url) as conn:
        oldest = await conn.fetchval("SELECT min(txid) FROM ledger")
        await conn.execute(LEDGER_OFF)
        # As if inserted by a transaction older than checkpoint 1's range.
        await conn.execute("UPDATE ledger SET txid = $1 WHERE seq = $2", oldest, seq)
    problem = (
        f"ledger position {seq}: no checkpoint covers it, though its transaction is older "
        "than checkpoint 1's range: it was inserted into history after that range was anchored"
    )
    assert (await verify(url, signer)).problems == [problem]
    # The checkpoint computation names it rather than skipping it, and never anchors it.
    await write(url, "an honest one")
    taken = await take(url, signer)
    assert taken.made is not None and taken.made.entries == 1
    assert taken.strays == (seq,)
    assert (await verify(url, signer)).problems == [
        problem.replace("checkpoint 1's", "checkpoint 2's")
    ]


async def test_a_checkpoint_removed_from_the_middle_is_found_without_the_key(
    databases: Databases, tmp_path: Path
) -> None:
    url, _ = await anchored(databases, tmp_path)
    (middle,) = await write(url, "anchored by checkpoint 2")
    assert (await take(url)).made is not None
    await write(url, "anchored by checkpoint 3")
    assert (await take(url)).made is not None
    assert (await verify(url)).ok
    # The owner removes checkpoint 2 and relinks checkpoint 3 to checkpoint 1.
    async with sql(url) as conn:
        await conn.execute(CHECKPOINTS_OFF)
        first = await conn.fetchval("SELECT hash FROM checkpoints WHERE seq = 1")
        covers = await conn.fetchval("SELECT covers FROM checkpoints WHERE seq = 3")
        await conn.execute("DELETE FROM checkpoints WHERE seq = 2")
        hashes = [r[0] for r in await conn.fetch("SELECT hash FROM ledger ORDER BY seq")][
            -len(checkpoints.parse_ranges(covers)) :
        ]
        await conn.execute(
            "UPDATE checkpoints SET prev_hash = $1, hash = $2 WHERE seq = 3",
            first,
            checkpoints.chain(first, hashes),
        )
    (seq,) = await positions(url, middle)
    report = await verify(url)
    assert report.problems == [
        "checkpoint 3: checkpoint 2 is missing before it; checkpoints were removed",
        f"ledger position {seq}: no checkpoint covers it, though its transaction is older than "
        "checkpoint 3's range: it was inserted into history after that range was anchored",
    ]


async def test_two_checkpoints_covering_one_entry_are_found(
    databases: Databases, tmp_path: Path
) -> None:
    url, _ = await anchored(databases, tmp_path)
    await write(url, "anchored by checkpoint 2")
    made = (await take(url)).made
    assert made is not None
    async with sql(url) as conn:
        await conn.execute(CHECKPOINTS_OFF)
        await conn.execute("UPDATE checkpoints SET covers = '1-1,' || covers WHERE seq = 2")
    report = await verify(url)
    assert "checkpoints 1 and 2 both cover ledger positions 1-1" in report.problems


async def test_every_field_of_a_checkpoint_is_signed(databases: Databases, tmp_path: Path) -> None:
    url, signer = await anchored(databases, tmp_path)
    forged = "checkpoint 1: the signature does not match; it was forged"
    for column, value in (
        ("at", "at - interval '1 hour'"),
        ("below_txid", "(below_txid::text::bigint - 1)::text::xid8"),
        ("signed_format", "1"),
    ):
        copy = await copy_db(databases, url)
        async with sql(copy) as conn:
            await conn.execute(CHECKPOINTS_OFF)
            await conn.execute(f"UPDATE checkpoints SET {column} = {value}")
        problems = (await verify(copy, replace(signer, memory=signing.memory_of(copy)))).problems
        assert forged in problems, (column, problems)


async def test_a_checkpoint_signed_before_every_field_was_still_verifies(
    databases: Databases, tmp_path: Path
) -> None:
    url, signer = await anchored(databases, tmp_path)
    async with sql(url) as conn:
        row = await conn.fetchrow(f"SELECT {checkpoints.COLUMNS} FROM checkpoints")
        old = replace(Checkpoint.from_row(row), signed_format=1)
        await conn.execute(CHECKPOINTS_OFF)
        await conn.execute(
            "UPDATE checkpoints SET signed_format = 1, signature = $1",
            signer.sign(old.payload()),
        )
    assert (await verify(url, signer)).ok
    # Its range is not signed, so verify checks it against the transactions begun.
    async with sql(url) as conn:
        await conn.execute(CHECKPOINTS_OFF)
        await conn.execute("UPDATE checkpoints SET at = at + $1", timedelta(hours=1))
    assert (await verify(url, signer)).ok


async def test_a_tail_cut_after_the_newest_checkpoint_is_beyond_the_chains(
    databases: Databases, repo: Path
) -> None:
    """What docs/security.md's "What is protected" says: hash chains cannot see the newest versions
    of a record removed with its projection rolled back to match; a checkpoint can."""
    url = await databases.create()
    async with run_gateway(settings(url)) as gateway:
        rid = (await ingest(gateway, "first", ["org:Acme"]))["id"]
        await gateway.data(UPDATE, {"id": rid, "content": "second"})
    before = await copy_db(databases, url)
    await take(url)  # anchors both versions of the record in `url`, none in `before`
    for target in (before, url):
        await cut_tail(target, rid)
    assert (await verify(before)).ok
    problems = (await verify(url)).problems
    assert problems == [
        "checkpoint 1: covers 3 entries, but the ledger holds 2 at those positions that hash "
        "differently: history before it was erased or rewritten"
    ]
    page = (repo / "docs" / "security.md").read_text(encoding="utf-8")
    chains = next(line for line in page.splitlines() if line.startswith("| hash chains |"))
    stops, misses = chains.split(" | ")[1:3]
    assert "cut" not in stops
    assert "a chain's tail cut" in misses and "only a checkpoint" in misses


async def cut_tail(url: str, rid: str) -> None:
    """Remove a record's newest version and roll its projection back to the one before."""
    async with sql(url) as conn:
        await conn.execute(LEDGER_OFF)
        await conn.execute(EVENTS_OFF)
        await conn.execute("DELETE FROM ledger WHERE object_id = $1 AND version = 2", rid)
        await conn.execute(
            "DELETE FROM audit_events WHERE object_id = $1 AND version_after = 2", rid
        )
        first = await conn.fetchrow(
            "SELECT state, at, hash FROM ledger WHERE object_id = $1 AND version = 1", rid
        )
        await conn.execute(
            "UPDATE records SET content = $2::jsonb->>'content', version = 1, updated_at = $3, "
            "ledger_hash = $4 WHERE id = $1",
            rid,
            first["state"],
            first["at"],
            first["hash"],
        )
        await conn.execute(
            "DELETE FROM record_words WHERE record_id = $1 AND from_version = 2", rid
        )
        await conn.execute("UPDATE record_words SET recorded_to = NULL WHERE record_id = $1", rid)
        # And counts the search statistics again from the words it left.
        await recount(conn)


async def copy_db(databases: Databases, url: str) -> str:
    from tests.store.test_ledger import copy_of

    return await copy_of(databases, url)


def test_processes_starting_together_make_one_key(tmp_path: Path) -> None:
    """Gateways (or workers) starting side by side on a shared key folder: one key, and
    none reads it half written."""
    path = tmp_path / "shared" / "checkpoint-key.pem"
    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda _: signing.load_or_create(path, "m").key_id, range(8)))
    assert len(set(made)) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["checkpoint-key.pem"]


async def test_the_checkpoint_command_names_what_it_cannot_anchor(databases: Databases) -> None:
    url = await databases.create()
    await write(url, "one")
    assert (await take(url)).made is not None  # unsigned: the command's key takes over
    (late,) = await write(url, "slipped into the past")
    (seq,) = await positions(url, late)
    async with sql(url) as conn:
        oldest = await conn.fetchval("SELECT min(txid) FROM ledger")
        await conn.execute(LEDGER_OFF)
        await conn.execute("UPDATE ledger SET txid = $1 WHERE seq = $2", oldest, seq)
    await write(url, "an honest one")
    await settled(url)
    status, out, err = await edgeloom(url, "checkpoint")
    assert status == 1, (out, err)
    assert "checkpoint 2: 1 new entries" in out
    assert f"(positions {seq}) are older than the newest checkpoint's range" in err
    async with sql(url) as conn:
        await conn.execute(CHECKPOINTS_OFF)
        await conn.execute(f"UPDATE checkpoints SET below_txid = '4000000000' WHERE seq = {NEWEST}")
    status, out, err = await edgeloom(url, "checkpoint")
    assert status == 2, (out, err)
    assert "edgeloom: checkpoint 2 claims to cover the transactions below 4000000000" in err
