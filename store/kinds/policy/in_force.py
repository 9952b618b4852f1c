"""The policy in force: reading the policy head and caching parsed versions.

Policy versions are ledger entries of kind "policy"; applying one is the command
`store.kinds.policy.commands.ApplyPolicy`, run by the executor like every other write.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from policies.loader import load_policy
from policies.model import Policy
from store.errors import NoPolicyError
from store.pool import Conn, Pool, plain_url

# Reads accept a policy this many seconds old (another replica may have applied a
# newer one); every write re-reads the head under a lock instead.
READ_TTL_SECONDS = 1.0

VERSION_SQL = "SELECT version, yaml, applied_at, applied_by FROM policy_versions WHERE version = $1"
HEAD_SQL = "SELECT version FROM policy_head WHERE id = 1"


@dataclass(frozen=True)
class PolicyVersion:
    """One applied policy: its version, its text, and who applied it when."""

    version: int
    yaml: str
    applied_at: datetime
    applied_by: str
    policy: Policy


@dataclass
class PolicyCache:
    """Parsed policy versions of this process, keyed by version (versions never change)."""

    versions: dict[int, PolicyVersion]
    head: int = -1
    checked_at: float = 0.0

    @classmethod
    def empty(cls) -> PolicyCache:
        return cls(versions={})

    async def version(self, conn: Conn, number: int) -> PolicyVersion:
        cached = self.versions.get(number)
        if cached is not None:
            return cached
        row = await conn.fetchrow(VERSION_SQL, number)
        if row is None:
            raise LookupError(f"policy version {number} is not in policy_versions")
        loaded = PolicyVersion(
            version=row["version"],
            yaml=row["yaml"],
            applied_at=row["applied_at"],
            applied_by=row["applied_by"],
            policy=load_policy(row["yaml"], f"policy version {number}"),
        )
        self.versions[number] = loaded
        return loaded

    async def current_version(self, conn: Conn) -> PolicyVersion:
        """The policy in force now, read on `conn`; refuses when there is none."""
        head = await conn.fetchval(HEAD_SQL)
        if not head:
            raise NoPolicyError()
        return await self.version(conn, head)

    def fresh(self) -> PolicyVersion | None:
        """The cached head while it is at most READ_TTL_SECONDS old, else None."""
        if self.head > 0 and time.monotonic() - self.checked_at < READ_TTL_SECONDS:
            return self.versions[self.head]
        return None

    def remember(self, version: PolicyVersion) -> None:
        self.versions[version.version] = version
        self.head = max(self.head, version.version)
        self.checked_at = time.monotonic()


async def current(pool: Pool, cache: PolicyCache) -> PolicyVersion | None:
    """The policy in force for reads (at most READ_TTL_SECONDS stale), or None if none."""
    fresh = cache.fresh()
    if fresh is not None:
        return fresh
    async with pool.acquire() as conn:
        head = await conn.fetchval(HEAD_SQL)
        if not head:
            return None
        version = await cache.version(conn, head)
    cache.head = head
    cache.checked_at = time.monotonic()
    return version


async def in_force_at(url: str) -> PolicyVersion | None:
    """The policy in force in the database at `url` (for the command line), or None."""
    conn = await asyncpg.connect(plain_url(url))
    try:
        head = await conn.fetchval(HEAD_SQL)
        return await PolicyCache.empty().version(conn, head) if head else None
    finally:
        await conn.close()


async def appliers(conn: Conn) -> list[tuple[int, str, str]]:
    """Every applied version, newest first: (version, applied_by, yaml)."""
    rows = await conn.fetch(
        "SELECT version, applied_by, yaml FROM policy_versions ORDER BY version DESC"
    )
    return [(r[0], r[1], r[2]) for r in rows]


async def history(conn: Conn) -> list[tuple[int, datetime, str]]:
    """Every applied version, oldest first: (version, applied_at, applied_by)."""
    rows = await conn.fetch(
        "SELECT version, applied_at, applied_by FROM policy_versions ORDER BY version"
    )
    return [(r[0], r[1], r[2]) for r in rows]
