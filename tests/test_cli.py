"""The operator commands `edgeloom migrate` and `edgeloom verify`, run as real processes."""

from __future__ import annotations

import asyncio
import gc
import os
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from alembic.script import ScriptDirectory

from gql.cli.main import _parser
from gql.server.heap import GC_YOUNG_THRESHOLD
from gql.server.settings import Settings
from store.operations.migrate import MIGRATIONS
from tests.gql._api import UPDATE, ingest
from tests.support import (
    EDGELOOM,
    REPO,
    Databases,
    Gateway,
    communicate_within,
    run_gateway,
    sql,
    with_database,
)


async def edgeloom(database_url: str, *args: str) -> tuple[int, str, str]:
    """Run the command with DATABASE_URL set; (exit status, stdout, stderr)."""
    env = {**os.environ, "DATABASE_URL": database_url}
    process = await asyncio.create_subprocess_exec(
        str(EDGELOOM),
        *args,
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await communicate_within(process, f"edgeloom (pid {process.pid})")
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def with_scheme(url: str, scheme: str) -> str:
    return urlunsplit((scheme, *urlsplit(url)[1:]))


@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+asyncpg", "postgres"])
async def test_verify_passes_after_writes(gateway: Gateway, scheme: str) -> None:
    record = await ingest(gateway, "v1", ["org:Acme"])
    await gateway.data(UPDATE, {"id": record["id"], "properties": ["org:Globex"]})
    async with sql(gateway.database_url) as conn:
        records = await conn.fetchval("SELECT count(*) FROM records")
        entries = await conn.fetchval("SELECT count(*) FROM ledger")

    status, out, err = await edgeloom(with_scheme(gateway.database_url, scheme), "verify")
    assert status == 0, (out, err)
    assert f"verify ok: {records} records, {entries} ledger entries" in out
    assert "Traceback" not in err


async def test_verify_fails_after_tampering(databases: Databases) -> None:
    # A database of its own, written by a gateway of its own that is not verified at
    # teardown, so the tampering stays out of every other test.
    url = await databases.create()
    async with run_gateway(Settings(database_url=url, anonymous_agent="dev", pool_size=2)) as gw:
        record = await ingest(gw, "genuine", ["org:Acme"])
        await gw.data(UPDATE, {"id": record["id"], "content": "still genuine"})
    status, out, err = await edgeloom(url, "verify")
    assert status == 0, (out, err)
    assert "verify ok: 1 records, 3 ledger entries, 1 memberships" in out

    async with sql(url) as conn:
        await conn.execute("ALTER TABLE ledger DISABLE TRIGGER ledger_append_only")
        await conn.execute(
            "UPDATE ledger SET state = jsonb_set(state, '{content}', '\"forged\"') "
            "WHERE kind = 'record' AND version = 1"
        )
    status, out, err = await edgeloom(url, "verify")
    assert status == 1, (out, err)
    assert f"{record['id']} v1: hash does not match content" in out
    # The words index of that version was made from the genuine content.
    assert f"{record['id']}: words of version 1 differ from its content" in out
    assert "verify FAILED (2 problems)" in out
    assert "Traceback" not in err

    async with sql(url) as conn:
        await conn.execute("UPDATE records SET content = 'forged too'")
    status, out, err = await edgeloom(url, "verify")
    assert status == 1, (out, err)
    assert f"{record['id']}: records.content differs from the ledger" in out


async def test_migrate_builds_an_empty_database_and_is_repeatable(databases: Databases) -> None:
    name = f"edgeloom_t_{uuid.uuid4().hex[:10]}"
    async with sql(databases.url) as admin:
        await admin.execute(f'CREATE DATABASE "{name}"')  # empty: not from the template
    databases.created.append(name)
    url = with_database(databases.url, name)

    for _ in range(2):
        status, out, err = await edgeloom(url, "migrate")
        assert status == 0, (out, err)
        assert "migrations applied" in out
    async with sql(url) as conn:
        head = await conn.fetchval("SELECT version_num FROM alembic_version")
        tables = {
            row["tablename"]
            for row in await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            )
        }
    assert head == ScriptDirectory(str(MIGRATIONS)).get_current_head()
    assert {"ledger", "records", "edge_properties", "audit_events", "policy_versions"} <= tables
    status, out, err = await edgeloom(url, "verify")
    assert status == 0, (out, err)


async def test_a_database_url_of_another_kind_is_refused_plainly() -> None:
    status, out, err = await edgeloom("mysql://root@127.0.0.1/db", "verify")
    assert status == 2
    assert "DATABASE_URL must start with postgresql://" in err
    assert "Traceback" not in err


async def test_an_unreachable_database_is_not_reported_as_tampering(databases: Databases) -> None:
    missing = with_database(databases.url, f"edgeloom_missing_{uuid.uuid4().hex[:8]}")
    status, out, err = await edgeloom(missing, "verify")
    assert status == 2, (out, err)  # 1 means the ledger and projections differ
    assert "cannot use the database" in err
    assert "does not exist" in err
    assert "Traceback" not in err


def test_every_command_takes_data_dir_after_its_own_arguments() -> None:

    for argv in (
        ["serve", "--data-dir", "d"],
        ["migrate", "--data-dir", "d"],
        ["verify", "--data-dir", "d"],
        ["token", "create", "--agent", "sales", "--data-dir", "d"],
        ["token", "list", "--data-dir", "d"],
        ["token", "revoke", "tok_1", "--data-dir", "d"],
        ["token", "rotate", "tok_1", "--grace", "5m", "--data-dir", "d"],
        ["token", "create", "--agent", "sales", "--expires-in", "30d", "--data-dir", "d"],
    ):
        assert _parser().parse_args(argv).data_dir == Path("d"), argv


async def test_verify_says_the_database_went_away_rather_than_failing(
    databases: Databases,
) -> None:
    url = await databases.create()
    async with sql(url) as admin:
        # Cut every other connection to this database the moment verify opens one.
        watcher = asyncio.create_task(_terminate_others(admin))
        try:
            status, out, err = await edgeloom(url, "verify")
        finally:
            watcher.cancel()
    assert status in (0, 2), (out, err)
    assert "Traceback" not in err
    if status == 2:
        assert "cannot use the database" in err


async def _terminate_others(conn: asyncpg.Connection) -> None:
    while True:
        await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        await asyncio.sleep(0.005)


async def test_a_started_gateway_settles_its_heap_and_gives_it_back(databases: Databases) -> None:
    before = gc.get_threshold()
    settings = Settings(database_url=await databases.create(), anonymous_agent="dev", pool_size=2)
    async with run_gateway(settings):
        # What was built at start is out of the collector's way; young collections are rarer.
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
