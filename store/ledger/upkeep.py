"""Planner statistics and the visibility map for what bulk writes changed, refreshed off
the request path.

Until PostgreSQL analyzes new rows it plans for tables it believes empty, and
autovacuum's first ANALYZE comes tens of seconds after a large load, or never soon
after a smaller one. Until a table is vacuumed, the first read of each new page sets its
rows' hint bits (the reader writes the page), and an index-only scan visits the heap
for every row, the visibility map being unset. So once the writes of this process have
changed `ANALYZE_AFTER_ROWS` rows of a table since its last upkeep here, the table is
vacuumed and analyzed in a background task: after the commit, on a connection of its
own, never in a write's transaction nor before its caller's answer. A task waits
`SETTLE_SECONDS` first and then takes every table due by then, so a stream of batches is
seen to once per pause rather than after each batch (VACUUM skips the pages an earlier
one left all-visible, so each pass costs what was written since). The count fold
deletes every delta row it folds: once it has deleted that many, its tables are due
too.

VACUUM is the owner's, or, on PostgreSQL 17 and later, a role's granted MAINTAIN, as
the gateway's role is on every table it writes (store.operations.roles). A table the
connection's role may not vacuum (the gateway's role before 17) is analyzed as its
owner (migration 0018) and left to autovacuum, which migration 0018 tells to vacuum
the deltas after as many dead rows whatever their size.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from store.ledger import registry
from store.ledger.registry import EVERY_WRITE_TABLES, Rows, tables
from store.pool import Conn, Pool, PoolClosedError, unlimited

# Rows a table's share of the writes (entries, events and projection rows together: an
# upper bound on its own rows) may change before it is analyzed.
ANALYZE_AFTER_ROWS = 10_000
SETTLE_SECONDS = 1.0
# The server version (server_version_num) with the MAINTAIN privilege (VACUUM, ANALYZE).
MAINTAIN_SINCE = 170_000

log = logging.getLogger(__name__)


class Upkeep:
    """Counts the rows this process's writes change per table, and analyzes the tables
    past `after_rows` in the background."""

    def __init__(
        self, pool: Pool, after_rows: int = ANALYZE_AFTER_ROWS, settle: float = SETTLE_SECONDS
    ) -> None:
        self._pool = pool
        self._after_rows = after_rows
        self._settle = settle
        self._changed: dict[str, int] = {}
        self._unfolded = 0
        self._task: asyncio.Task[None] | None = None

    def wrote(self, rows: Rows) -> None:
        """Counts a write's rows (appended in a transaction that may yet roll back: the
        count is an upper bound)."""
        n = len(rows.entries) + len(rows.events) + sum(len(p) for p in rows.parts.values())
        touched = set(EVERY_WRITE_TABLES)
        for name in {entry["kind"] for entry in rows.entries}:
            kind = registry.kind_of(name)
            touched.update(() if kind is None else (t.name for t in kind.tables))
        for table in touched:
            self._changed[table] = self._changed.get(table, 0) + n
        self._unfolded += n

    def folded(self) -> None:
        """The fold deleted the delta rows of the writes since the last fold: past
        `after_rows` (counted as in `wrote`), their tables are due."""
        if self._unfolded >= self._after_rows:
            for table in tables("folded"):
                self._changed[table] = max(self._changed.get(table, 0), self._unfolded)
        self._unfolded = 0

    def committed(self) -> None:
        """Starts the background task when a table is due and none is running."""
        if self._task is None and self._due():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _due(self) -> list[str]:
        return sorted(t for t, n in self._changed.items() if n >= self._after_rows)

    async def finish(self) -> None:
        """Sees to what is due now, without the pause: the process is ending (a folder
        intake, the gateway stopping), and a task left waiting would be lost."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._analyze()

    async def _run(self) -> None:
        try:
            await asyncio.sleep(self._settle)
            await self._analyze()
        finally:
            self._task = None

    async def _analyze(self) -> None:
        try:
            while due := self._due():
                for table in due:
                    self._changed.pop(table)
                async with self._pool.acquire() as conn, unlimited(conn):
                    vacuum = await _vacuumable(conn, due)
                    if vacuum:
                        # Outside any transaction and function, as VACUUM must be.
                        await conn.execute(f"VACUUM (ANALYZE) {', '.join(vacuum)}")
                    rest = [t for t in due if t not in vacuum]
                    if rest:
                        await conn.execute("SELECT edgeloom_analyze($1::text[])", rest)
        except PoolClosedError:
            pass
        except Exception:
            # Statistics come late, not wrong: autovacuum still sees to the tables.
            log.warning("the upkeep of the tables bulk writes changed failed", exc_info=True)


# Who may VACUUM a table: before PostgreSQL 17 its owner or the database's (a superuser
# is both); from 17 on whoever holds MAINTAIN on it (its owner does).
_MAY_VACUUM = {
    False: "pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE')",
    True: "has_table_privilege(c.oid, 'MAINTAIN')",
}


async def _vacuumable(conn: Conn, due: list[str]) -> list[str]:
    """The tables of `due` the connection's role may vacuum, in order."""
    maintain = conn.get_server_version().major * 10_000 >= MAINTAIN_SINCE
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_class c"
        " JOIN pg_database d ON d.datname = current_database()"
        " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'"
        f" AND c.relname = ANY($1::text[]) AND ({_MAY_VACUUM[maintain]})"
        " ORDER BY c.relname",
        due,
    )
    return [r[0] for r in rows]
