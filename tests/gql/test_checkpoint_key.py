"""The gateway's checkpoint key and checkpoint loop: a lost or swapped key stops the start,
and a loop that cannot anchor says why."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from gql.server.app import create_app
from gql.server.settings import Settings
from store.operations import signing
from store.operations.checkpoints import CheckpointKeyError
from store.operations.verify import verify
from tests.gql._api import ingest
from tests.store.test_checkpoint_ranges import CHECKPOINTS_OFF, NEWEST, take
from tests.support import Databases, run_gateway, sql
from tests.test_cli import edgeloom


def keyed(url: str, key: Path, **fields: object) -> Settings:
    chosen: dict[str, object] = {"checkpoint_seconds": 0, **fields}
    return Settings(
        database_url=url,
        anonymous_agent="dev",
        pool_size=2,
        read_pool_size=2,
        checkpoint_key=key,
        **chosen,  # type: ignore[arg-type]
    )


async def starts(settings: Settings) -> None:
    """Run the gateway's start-up and shut-down, as uvicorn's lifespan does."""
    app = create_app(settings)
    async with app.starlette.router.lifespan_context(app.starlette):
        pass


async def test_a_lost_or_swapped_key_stops_the_start_until_replaced_on_purpose(
    databases: Databases, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edgeloom.checkpoints")
    url = await databases.create()
    key = tmp_path / "checkpoint-key.pem"
    async with run_gateway(keyed(url, key)) as gateway:
        await ingest(gateway, "signed for", ["org:Acme"])
    first = signing.load(key, signing.memory_of(url))
    assert first is not None
    assert f"created the checkpoint key {key} (key id {first.key_id})" in caplog.text
    assert (await take(url, first)).made is not None

    key.unlink()
    with pytest.raises(CheckpointKeyError) as refused:
        await starts(keyed(url, key))
    assert f"the checkpoint key {key} is missing" in refused.value.message
    assert f"signed by key {first.key_id}" in refused.value.message
    assert "--new-checkpoint-key" in refused.value.message
    assert not key.exists()  # nothing made behind the operator's back
    status, out, err = await edgeloom(url, "checkpoint", "--checkpoint-key", str(key))
    assert status == 2 and f"the checkpoint key {key} is missing" in err, (out, err)

    other = signing.create(tmp_path / "other.pem", signing.memory_of(url))
    with pytest.raises(CheckpointKeyError, match=f"key id {other.key_id}\\) did not sign them"):
        await starts(keyed(url, other.path))

    caplog.clear()
    await starts(keyed(url, key, new_checkpoint_key=True))
    second = signing.load(key, signing.memory_of(url))
    assert second is not None and second.key_id != first.key_id
    assert f"created the checkpoint key {key}" in caplog.text
    assert f"replaces key {first.key_id}, which signed checkpoints up to 1" in caplog.text
    async with sql(url) as conn:
        newest = await conn.fetchrow("SELECT seq, key_id FROM checkpoints ORDER BY seq DESC")
    assert tuple(newest) == (2, second.key_id)
    # The new key vouches for the one before it, and the next start needs no flag.
    await starts(keyed(url, key))
    assert (await verify(url, second)).ok


async def test_fresh_memories_share_one_key(databases: Databases, tmp_path: Path) -> None:
    """As the suite runs: one key file, many new databases, each started without a flag."""
    key = tmp_path / "checkpoint-key.pem"
    for _ in range(2):
        url = await databases.create()
        await starts(keyed(url, key))
        signer = signing.load(key, signing.memory_of(url))
        assert signer is not None
        assert (await take(url, signer)).made is not None
        await starts(keyed(url, key))


async def test_a_loop_that_cannot_anchor_says_why(
    databases: Databases, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edgeloom")
    url = await databases.create()
    key = tmp_path / "checkpoint-key.pem"
    async with run_gateway(keyed(url, key, checkpoint_seconds=0.2)) as gateway:
        # A transaction that stays open holds the horizon back: nothing settles after it.
        async with sql(url) as holder, holder.transaction():
            txid = await holder.fetchval("SELECT pg_current_xact_id()::text::bigint")
            await ingest(gateway, "waits for the horizon", ["org:Acme"])
            await wait_for(caplog, "nothing anchored: ")
        assert f"wait for transaction {txid}, the oldest still running" in caplog.text or (
            # Or an older one of another database on the same server, held as long.
            "the oldest still running, to end" in caplog.text
        )
        async with sql(url) as conn:
            for _ in range(1200):  # until every entry is anchored
                if await conn.fetchval(
                    "SELECT (SELECT count(*) FROM ledger) = "
                    "(SELECT coalesce(sum(entries), 0) FROM checkpoints)"
                ):
                    break
                await asyncio.sleep(0.05)
            await conn.execute(CHECKPOINTS_OFF)
            await conn.execute(
                f"UPDATE checkpoints SET below_txid = '4000000000' WHERE seq = {NEWEST}"
            )
        await ingest(gateway, "after the range was moved", ["org:Acme"])
        await wait_for(caplog, "no checkpoint can be taken: checkpoint ")
    assert "below 4000000000" in caplog.text and "its range was altered" in caplog.text


async def wait_for(caplog: pytest.LogCaptureFixture, text: str) -> None:
    for _ in range(1200):
        if text in caplog.text:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never logged {text!r}: {caplog.text}")
