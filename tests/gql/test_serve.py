"""`edgeloom serve` as an operator runs it: a subprocess, a policy file, and its refusals.

Every server here listens on loopback only; the non-loopback cases are refused
before anything binds (gql/cli/main.py decides them before uvicorn starts).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gql.api.auth import NO_TOKEN
from gql.cli.main import main
from gql.server.metrics import SAMPLE_SECONDS
from store.database import create_engine
from store.operations import tokens
from tests.gql._policy_support import INGEST, POLICY
from tests.support import (
    EDGELOOM,
    REPO,
    Databases,
    StartBudget,
    assert_verified,
    communicate_within,
    free_port,
    no_request_id,
)

# A first embedded start runs initdb: a start's CPU, counted in the serve process and the
# PostgreSQL it starts (not its child: a server of its own), is allowed this much.
START_CPU = 60.0


def environment(database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return env


@dataclass
class Served:
    """A running `edgeloom serve`: a client, its GraphQL URL, its output, its process."""

    client: httpx.AsyncClient
    url: str
    log: Path
    process: asyncio.subprocess.Process


@asynccontextmanager
async def serving(
    database_url: str | None,
    tmp_path: Path,
    *args: str,
    stop: signal.Signals = signal.SIGTERM,
    env: Mapping[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> AsyncIterator[Served]:
    """`edgeloom serve ARGS` on a free loopback port, until /healthz answers; then `stop`ped.

    Without `database_url` it runs an embedded PostgreSQL (pass --data-dir). `env` adds
    to its environment; `preexec_fn` runs in the child before it starts (a limit).
    """
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            str(EDGELOOM),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            *args,
            cwd=REPO,
            env=environment(database_url) | dict(env or {}),
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            preexec_fn=preexec_fn,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            budget = StartBudget.of_process(process.pid, "edgeloom serve", START_CPU)
            while True:
                assert process.returncode is None, log.read_text()
                try:
                    if (await client.get(base + "/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                try:
                    budget.check()
                except AssertionError as exc:
                    raise AssertionError(f"{exc}\n{log.read_text()}") from None
                await asyncio.sleep(0.1)
            yield Served(client, base + "/graphql", log, process)
    finally:
        if process.returncode is None:
            process.send_signal(stop)
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                await process.wait()


async def refused(database_url: str | None, *args: str) -> str:
    """Run `edgeloom serve ARGS`, which must exit non-zero at once; returns its stderr."""
    process = await asyncio.create_subprocess_exec(
        str(EDGELOOM),
        "serve",
        *args,
        cwd=REPO,
        env=environment(database_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    # A refusal comes before any database: only a process start.
    out, err = await communicate_within(process, "edgeloom serve's refusal")
    assert process.returncode == 2, (out, err)
    assert b"Traceback" not in err, err
    return err.decode()


async def call(
    client: httpx.AsyncClient, url: str, query: str, token: str | None = None, **variables: object
) -> dict[str, object]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    response = await client.post(
        url, json={"query": query, "variables": variables}, headers=headers
    )
    body: dict[str, object] = response.json()
    return body


async def test_serve_with_a_policy_file(databases: Databases, tmp_path: Path) -> None:
    database_url = await databases.create()
    async with serving(database_url, tmp_path, "--policy", "policies/examples/crm.yaml") as served:
        client, url = served.client, served.url
        engine = create_engine(database_url, pool_size=1)
        try:
            _, secret = await tokens.create(engine, "sales")
        finally:
            await engine.dispose()
        policy = await call(client, url, POLICY, secret)
        assert policy["data"]["policy"]["version"] == 1  # type: ignore[index]
        assert policy["data"]["policy"]["appliedBy"] == "operator"  # type: ignore[index]
        assert "crm:" in policy["data"]["policy"]["yaml"]  # type: ignore[index]
        meeting = {"content": "call", "lane": "crm", "sourceType": "meeting"}
        written = await call(client, url, INGEST, secret, input=meeting)
        assert written["data"]["ingest"]["authority"] == "documentary"  # type: ignore[index]
        anonymous = await call(client, url, "{ profile { agent } }")
        assert anonymous["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"  # type: ignore[index]
    await assert_verified(database_url)


async def test_serve_without_a_policy_runs_the_dev_policy_on_loopback(
    databases: Databases, tmp_path: Path
) -> None:
    """Also sized as an operator sizes it for a small server: the read pool from the
    environment, the engine's by option (the read pool alone opens 20 by default)."""
    database_url = await databases.create()
    small = {"EDGELOOM_READ_POOL_SIZE": "3"}
    async with serving(database_url, tmp_path, "--engine-pool-size", "1", env=small) as served:
        client, url = served.client, served.url
        profile = await call(client, url, "{ profile { agent readLanes writeLanes } }")
        assert profile == {
            "data": {
                "profile": {"agent": "dev", "readLanes": ["default"], "writeLanes": ["default"]}
            }
        }
        database = databases.created[-1]
        conn = await asyncpg.connect(database_url)
        try:
            held = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = $1 AND pid <> pg_backend_pid()",
                database,
            )
        finally:
            await conn.close()
        assert 3 <= held <= 5


def test_serve_refuses_a_pool_size_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--read-pool-size", "0"])
    assert "'0' is not a whole number of 1 or more" in capsys.readouterr().err


async def test_serve_off_loopback_without_a_policy_is_refused_before_any_database(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "pgdata"
    err = await refused(
        None, "--host", "0.0.0.0", "--port", str(free_port()), "--data-dir", str(data_dir)
    )
    assert err.startswith(
        "edgeloom: refusing to listen on 0.0.0.0: "
        "the development policy (no tokens) is served on loopback only; pass --policy FILE"
    ), err
    assert not data_dir.exists()


async def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    data_dir = tmp_path / "pgdata"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        err = await refused(
            None, "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data_dir)
        )
    assert err == (
        f"edgeloom: port {port} on 127.0.0.1 is in use by another program; stop it, or pass "
        "--port with a free port\n"
    )
    assert not data_dir.exists()  # no embedded server was started, nothing migrated


async def test_serve_off_loopback_with_a_policy_but_no_token_is_refused(
    databases: Databases,
) -> None:
    database_url = await databases.create()
    err = await refused(
        database_url,
        "--host",
        "0.0.0.0",
        "--port",
        str(free_port()),
        "--policy",
        "policies/examples/crm.yaml",
    )
    assert err.strip().splitlines()[-1] == (
        "edgeloom: refusing to listen on 0.0.0.0: no active bearer token exists, so no agent "
        "could call it; mint one first with 'edgeloom token create --agent NAME'"
    )


def refused_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """`edgeloom serve ARGS` run by the CLI's own entry point, in this process: the refusals
    that come before any database or socket (the process as a whole is the tests above)."""
    assert main(["serve", "--port", str(free_port()), *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return err


def test_serve_refuses_a_missing_or_bad_policy_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.yaml"
    err = refused_in_process(capsys, "--policy", str(missing), "--data-dir", str(tmp_path / "pg"))
    assert (
        err.strip() == f"edgeloom: cannot read policy file '{missing}': No such file or directory"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("lanes:\n  notes: {colour: red}\n", encoding="utf-8")
    err = refused_in_process(capsys, "--policy", str(bad), "--data-dir", str(tmp_path / "pg"))
    assert err.strip() == (
        f"edgeloom: policy '{bad}': key 'lanes.notes': unknown key 'colour'; "
        "allowed keys: ['embedding', 'properties_personal', 'source_types', 'text_search', 'ttl']"
    )
    assert not (tmp_path / "pg").exists()


def test_serve_refuses_an_alias_bomb_policy_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    levels = [f"&a0 [{', '.join(['lol'] * 10)}]"]
    levels += [f"&a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 8)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(
        f"lanes: {{crm: {{}}}}\nagents:\n  a:\n   apply_policy: [{', '.join(levels)}]\n",
        encoding="utf-8",
    )
    # The time it takes is tested on the loader (tests/policies).
    err = refused_in_process(capsys, "--policy", str(bomb), "--data-dir", str(tmp_path / "pg"))
    assert err.strip() == (
        f"edgeloom: policy '{bomb}': not valid YAML (aliases may add at most 100,000 nodes "
        "to a document; those of the node at line 4 column 187)"
    ), err
    assert not (tmp_path / "pg").exists()


def test_dev_policy_is_refused_off_loopback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused_in_process(
        capsys, "--host", "0.0.0.0", "--dev-policy", "--data-dir", str(tmp_path / "pg")
    )
    assert "the development policy (no tokens) is served on loopback only" in err
    assert not (tmp_path / "pg").exists()


# -- the policy in force at start ------------------------------------------------

PROFILE = "{ profile { agent } }"


@pytest.mark.over10s("four `edgeloom serve` processes in turn on one database")
async def test_a_plain_start_after_a_policy_file_keeps_it_and_says_how_to_get_back(
    databases: Databases, tmp_path: Path
) -> None:
    database_url = await databases.create()
    async with serving(database_url, tmp_path, "--policy", "policies/examples/crm.yaml") as s:
        pass
    out = s.log.read_text()
    assert (
        "policy version 1 in force (from policies/examples/crm.yaml), applied by operator at "
    ) in out, out
    assert "development mode" not in out

    async with serving(database_url, tmp_path) as s:
        refused_call = await call(s.client, s.url, PROFILE)
    out = s.log.read_text()
    assert "development mode" not in out, out
    assert (
        "policy version 1 in force (applied earlier, by applyPolicy or serve --policy), "
        "applied by operator at "
    ) in out
    assert (
        "policy version 1 is not the development policy, nor one its agent 'dev' applied over "
        "it, so every call needs a bearer token for an agent it declares (curator, planner, "
        "sales): mint one with 'edgeloom token create --agent NAME', or start with "
        "--dev-policy to apply the development policy again as a new version"
    ) in out
    [error] = refused_call["errors"]  # type: ignore[misc]
    assert no_request_id(error) == {"message": NO_TOKEN, "extensions": {"code": "UNAUTHENTICATED"}}

    async with serving(database_url, tmp_path, "--dev-policy") as s:
        profile = await call(s.client, s.url, PROFILE)
        policy = await call(s.client, s.url, "{ policy { version appliedBy } }")
    out = s.log.read_text()
    assert "policy version 2 in force (the development policy)" in out, out
    assert "development mode: requests without a token act as agent 'dev'" in out
    assert profile == {"data": {"profile": {"agent": "dev"}}}
    assert policy == {
        "data": {"policy": {"version": 2, "appliedBy": "operator:development-default"}}
    }

    async with serving(database_url, tmp_path) as s:
        assert await call(s.client, s.url, PROFILE) == {"data": {"profile": {"agent": "dev"}}}
    assert "policy version 2 in force (the development policy)" in s.log.read_text()


# -- stopping: the embedded PostgreSQL stops with the last process ----------------


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split()[0])


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def assert_stopped(data_dir: Path, pid: int) -> None:
    deadline = time.monotonic() + 20
    while is_running(pid) or (data_dir / "postmaster.pid").exists():
        assert time.monotonic() < deadline, f"the embedded PostgreSQL (pid {pid}) still runs"
        await asyncio.sleep(0.1)


@asynccontextmanager
async def embedded_data_dir() -> AsyncIterator[Path]:
    """A data folder for an embedded server that no server outlives, whatever the test finds.

    Not under pytest's tmp_path: pytest resets the permissions of its folders at the start
    of every run on the machine, and the server runs as another user when we are root.
    """
    folder = Path(tempfile.mkdtemp(prefix="edgeloom-test-serve-"))
    data_dir = folder / "pgdata"
    try:
        yield data_dir
    finally:
        with suppress(OSError, ValueError):
            os.kill(postmaster_pid(data_dir), signal.SIGQUIT)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
async def test_a_stopped_gateway_stops_its_embedded_postgres(
    tmp_path: Path, stop: signal.Signals
) -> None:
    async with embedded_data_dir() as data_dir:
        async with serving(None, tmp_path, "--data-dir", str(data_dir), stop=stop) as s:
            pid = postmaster_pid(data_dir)
            assert is_running(pid)
        await assert_stopped(data_dir, pid)
        assert s.process.returncode == 0, s.log.read_text()
        assert "Traceback" not in s.log.read_text()


@pytest.mark.over10s("two `edgeloom serve` processes, each starting the embedded PostgreSQL")
async def test_a_gateway_killed_outright_does_not_keep_postgres_running_later(
    tmp_path: Path,
) -> None:
    """The killed process's pid stays in pgserver's list of users; the next start drops it."""
    async with embedded_data_dir() as data_dir:
        async with serving(None, tmp_path, "--data-dir", str(data_dir)) as s:
            pid = postmaster_pid(data_dir)
            s.process.kill()
            await s.process.wait()
        assert is_running(pid)  # nothing stopped it
        async with serving(None, tmp_path, "--data-dir", str(data_dir)) as s:
            assert postmaster_pid(data_dir) == pid  # the running server is reused
        await assert_stopped(data_dir, pid)


def is_zombie(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "Z"


@pytest.mark.over10s("two `edgeloom serve` processes, each starting the embedded PostgreSQL")
async def test_a_gateway_starts_while_a_killed_server_is_still_a_zombie(tmp_path: Path) -> None:
    """A server killed outright stays a zombie until its parent reaps it, and its pid file
    still names it; the next gateway must not take it for a live server."""
    async with embedded_data_dir() as data_dir:
        async with serving(None, tmp_path, "--data-dir", str(data_dir)):
            written = (data_dir / "postmaster.pid").read_text().splitlines()
        await assert_stopped(data_dir, int(written[0]))
        # A process of ours that has exited and that we do not reap: a zombie that stays.
        zombie = subprocess.Popen(["true"])
        try:
            deadline = time.monotonic() + 10
            while not is_zombie(zombie.pid):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            (data_dir / "postmaster.pid").write_text("\n".join([str(zombie.pid), *written[1:]]))
            async with serving(None, tmp_path, "--data-dir", str(data_dir)) as s:
                data = (await s.client.post(s.url, json={"query": "{ labels { label } }"})).json()
                assert data == {"data": {"labels": []}}, data
                assert is_running(postmaster_pid(data_dir))
                assert postmaster_pid(data_dir) != zombie.pid
        finally:
            zombie.wait()


@pytest.mark.over10s("edgeloom serve --workers 2: a supervisor, two worker processes, each serving")
async def test_serve_with_workers_sums_metrics_and_logs_each_request(
    databases: Databases, tmp_path: Path
) -> None:
    """Under --workers the processes' metrics are summed whichever one answers the scrape,
    and each request's JSON line is on stderr."""
    database_url = await databases.create()

    async def profiles(count: int) -> None:
        # A connection each, a millisecond apart: a process that is idle when a connection
        # arrives takes every one waiting (the kernel wakes the last to wait first), so they
        # arrive while the one that took the first is still answering it.
        async def one(delay: float) -> None:
            await asyncio.sleep(delay)
            async with httpx.AsyncClient(timeout=10, headers={"connection": "close"}) as client:
                body = await call(client, served.url, "{ profile { agent } }")
                assert body == {"data": {"profile": {"agent": "dev"}}}, body

        await asyncio.gather(*(one(n / 1000) for n in range(count)))

    def logged() -> list[dict[str, Any]]:
        lines = served.log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def processes(operation: str) -> set[str]:
        # Request ids begin with their process's prefix.
        return {
            line["requestId"].split("-")[0] for line in logged() if line["operation"] == operation
        }

    every = ("--request-log-every", "1")
    async with serving(
        database_url, tmp_path, "--workers", "2", "--log-level", "info", *every
    ) as served:
        calls = 0
        for _ in range(40):
            await profiles(8)
            calls += 8
            await asyncio.sleep(0.3)  # lines are gathered for a fifth of a second
            if len(processes("profile")) == 2:
                break
        assert len(processes("profile")) == 2, "one process answered every call"
        refused_call = await call(served.client, served.url, '{ record(id: "x") { id } }')
        [error] = refused_call["errors"]  # type: ignore[misc]
        request_id = error["extensions"]["requestId"]
        base = served.url.removesuffix("/graphql")
        await asyncio.sleep(SAMPLE_SECONDS + 0.5)  # each process hands its counts over
        for _ in range(3):  # answered by either process, the same sums
            text = (await served.client.get(base + "/metrics")).text
            [requests] = [
                s.value
                for f in text_string_to_metric_families(text)
                for s in f.samples
                if s.name == "edgeloom_requests_total" and s.labels["operation"] == "profile"
            ]
            assert requests == calls, text
        await asyncio.sleep(0.5)
        lines = logged()
    [line] = [line for line in lines if line["requestId"] == request_id]
    assert line["code"] == "BAD_USER_INPUT" and line["operation"] == "record", line
    assert sum(1 for line in lines if line["operation"] == "profile") == calls
