"""The policy ledger: which policy is in force, applying a new one, caching parsed versions."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from policies.guard import check_apply_policy
from policies.loader import load_policy
from policies.model import Policy
from store import tables as t
from store.errors import NoPolicyError
from store.hashing import entry_hash
from store.ids import new_event_id

# Reads accept a policy this many seconds old (another replica may have applied a
# newer one); every write re-reads the head under a lock instead.
READ_TTL_SECONDS = 1.0


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

    async def version(self, conn: AsyncConnection, number: int) -> PolicyVersion:
        cached = self.versions.get(number)
        if cached is not None:
            return cached
        row = (
            (
                await conn.execute(
                    select(t.policy_versions).where(t.policy_versions.c.version == number)
                )
            )
            .mappings()
            .one()
        )
        loaded = PolicyVersion(
            version=row["version"],
            yaml=row["yaml"],
            applied_at=row["applied_at"],
            applied_by=row["applied_by"],
            policy=load_policy(row["yaml"], f"policy version {number}"),
        )
        self.versions[number] = loaded
        return loaded

    def remember(self, version: PolicyVersion) -> None:
        self.versions[version.version] = version
        self.head = max(self.head, version.version)
        self.checked_at = time.monotonic()


async def lock_for_write(
    conn: AsyncConnection, cache: PolicyCache
) -> tuple[PolicyVersion, datetime]:
    """Share-lock the policy head for this transaction; return it and the database clock.

    applyPolicy takes the same row FOR UPDATE, so a write is decided under exactly
    the policy that is in force when it commits.
    """
    row = (
        await conn.execute(
            select(t.policy_head.c.version, func.clock_timestamp())
            .where(t.policy_head.c.id == 1)
            .with_for_update(read=True)
        )
    ).one()
    if row[0] == 0:
        raise NoPolicyError()
    version = await cache.version(conn, row[0])
    cache.head = max(cache.head, row[0])
    return version, row[1]


async def current(engine: AsyncEngine, cache: PolicyCache) -> PolicyVersion | None:
    """The policy in force for reads (at most READ_TTL_SECONDS stale), or None if none."""
    if cache.head > 0 and time.monotonic() - cache.checked_at < READ_TTL_SECONDS:
        return cache.versions[cache.head]
    async with engine.connect() as conn:
        head = (
            await conn.execute(select(t.policy_head.c.version).where(t.policy_head.c.id == 1))
        ).scalar_one()
        if head == 0:
            return None
        version = await cache.version(conn, head)
    cache.head = head
    cache.checked_at = time.monotonic()
    return version


async def apply(
    engine: AsyncEngine,
    cache: PolicyCache,
    yaml_text: str,
    applied_by: str,
    source: str = "applyPolicy",
    as_agent: str | None = None,
) -> PolicyVersion:
    """Validate and apply a policy as a new version; the same text again is a no-op.

    `as_agent` names the calling agent, who must be allowed to apply policy under
    the policy in force; operators (the CLI) pass None.
    """
    async with engine.begin() as conn:
        row = (
            await conn.execute(
                select(t.policy_head.c.version, func.clock_timestamp())
                .where(t.policy_head.c.id == 1)
                .with_for_update()
            )
        ).one()
        head, at = row[0], row[1]
        in_force = await cache.version(conn, head) if head > 0 else None
        if in_force is not None and as_agent is not None:
            # Permission first: a caller who may not apply a policy learns nothing from
            # having its text validated.
            check_apply_policy(in_force.policy, in_force.policy.agent(as_agent))
        policy = load_policy(yaml_text, source)
        if in_force is not None and in_force.yaml == yaml_text:
            return in_force
        applied = PolicyVersion(
            version=head + 1, yaml=yaml_text, applied_at=at, applied_by=applied_by, policy=policy
        )
        previous_hash = (
            await conn.execute(
                select(t.ledger.c.hash).where(
                    t.ledger.c.kind == "policy",
                    t.ledger.c.object_id == "policy",
                    t.ledger.c.version == head,
                )
            )
        ).scalar_one_or_none()
        fields: dict[str, Any] = {
            "kind": "policy",
            "object_id": "policy",
            "version": applied.version,
            "event": "policy_applied",
            "actor": applied_by,
            "at": at,
            "policy_version": head,
            "state": {"yaml": yaml_text},
            "prev_hash": previous_hash,
        }
        await conn.execute(insert(t.ledger).values(**fields, hash=entry_hash(**fields)))
        await conn.execute(
            insert(t.policy_versions).values(
                version=applied.version, yaml=yaml_text, applied_at=at, applied_by=applied_by
            )
        )
        await conn.execute(
            update(t.policy_head).where(t.policy_head.c.id == 1).values(version=applied.version)
        )
        await conn.execute(
            insert(t.audit_events).values(
                id=new_event_id(),
                kind="policy_applied",
                record_id=None,
                lane=None,
                actor=applied_by,
                at=at,
                payload={"version": applied.version, "previousVersion": head},
                version_before=head or None,
                version_after=applied.version,
                object_kind="policy",
                object_id="policy",
            )
        )
    cache.remember(applied)
    return applied


async def history(engine: AsyncEngine) -> list[tuple[int, datetime, str]]:
    """Every applied version, oldest first: (version, applied_at, applied_by)."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(
                t.policy_versions.c.version,
                t.policy_versions.c.applied_at,
                t.policy_versions.c.applied_by,
            ).order_by(t.policy_versions.c.version)
        )
        return [(r[0], r[1], r[2]) for r in rows]
