"""verify beside checkpoints being taken: the newest one recorded beside the key is read
before verify's snapshot, so one committing meanwhile is never taken for a removed one."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from gql.server.settings import Settings
from store.operations import checkpoints, signing
from store.operations.signing import Signer
from store.operations.verify import verify
from store.pool import connect
from tests.gql._api import ingest
from tests.store.test_checkpoint_ranges import take, write
from tests.support import Databases, run_gateway, sql


async def commit_checkpoint(url: str, signer: Signer) -> None:
    conn = await connect(url)
    try:
        made = (await checkpoints.take(conn, signer, even_if_empty=True)).made
        assert made is not None
    finally:
        await conn.close()


@dataclass(frozen=True)
class CheckpointingSigner(Signer):
    """The key, with a checkpoint committed (on a connection and thread of its own) just
    before or just after verify reads the newest one recorded beside it."""

    url: str = ""
    before_reading: bool = True

    def newest(self) -> tuple[int, str] | None:
        if self.before_reading:
            self._commit()
        seen = super().newest()
        if not self.before_reading:
            self._commit()
        return seen

    def _commit(self) -> None:
        plain = Signer(self.key, self.path, self.memory)
        failed: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(commit_checkpoint(self.url, plain))
            except BaseException as exc:
                failed.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join(30)
        assert not thread.is_alive() and not failed, failed


@pytest.mark.parametrize("before_reading", [True, False])
async def test_a_checkpoint_committed_as_verify_starts_is_no_alarm(
    databases: Databases, tmp_path: Path, before_reading: bool
) -> None:
    url = await databases.create()
    await write(url, "one", "two")
    signer = signing.load_or_create(tmp_path / "key.pem", signing.memory_of(url))
    assert (await take(url, signer)).made is not None
    hooked = CheckpointingSigner(
        signer.key, signer.path, signer.memory, url=url, before_reading=before_reading
    )
    report = await verify(url, hooked)
    assert report.ok, report.problems
    assert report.checkpoints == 2
    assert signer.newest() is not None and signer.newest()[0] == 2  # type: ignore[index]


async def test_verify_stays_clean_under_writes_and_checkpoints_every_second(
    databases: Databases, tmp_path: Path
) -> None:
    url = await databases.create()
    key = tmp_path / "key.pem"
    settings = Settings(
        database_url=url,
        anonymous_agent="dev",
        pool_size=2,
        read_pool_size=4,
        checkpoint_seconds=1,
        checkpoint_key=key,
    )
    async with run_gateway(settings) as gateway:
        signer = signing.load(key, signing.memory_of(url))
        assert signer is not None
        stop = asyncio.Event()

        async def writer() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                await ingest(gateway, f"live {n}", ["org:Busy"])

        writing = asyncio.create_task(writer())
        count = "SELECT count(*) FROM checkpoints"
        try:
            problems = []
            async with sql(url) as conn:
                before = await conn.fetchval(count)
                runs, made = 0, 0
                # At least 50 runs, over at least five checkpoints committed beside them.
                deadline = asyncio.get_running_loop().time() + 60
                while runs < 50 or (made < 5 and asyncio.get_running_loop().time() < deadline):
                    report = await verify(url, signer)
                    problems.extend(report.problems)
                    runs += 1
                    made = await conn.fetchval(count) - before
        finally:
            stop.set()
            await writing
    assert problems == []
    assert made >= 5, f"only {made} checkpoints were committed during {runs} verify runs"
