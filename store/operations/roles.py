"""Roles: migrations run as the owner, the gateway as a role that cannot undo history.

The runtime role may only SELECT and INSERT on the append-only tables (ledger, audit
events, checkpoints, policy versions), so neither a code path nor an injected
statement can update, delete, truncate or disable their triggers: only the owner of a
table may ALTER it. Projections it may also UPDATE, since they are caches the ledger
rebuilds.

The crossing role (migration 0032) holds the runtime role's privileges and crosses the
lanes' row-level security; the runtime role may `SET ROLE` to it, which the gateway does
only for its own work over every lane (`store.reads.lane_floor.CROSSING`), never for a
request.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from sqlalchemy import Connection, text

from store.ledger.registry import EVERY_WRITE_TABLES, tables
from store.ledger.upkeep import MAINTAIN_SINCE
from store.pool import plain_url
from store.reads.lane_floor import CROSSING_ROLE, RUNTIME_ROLE

log = logging.getLogger("edgeloom.roles")


# The kinds' tables join these (each kind declares what the role may do on its own).
APPEND_ONLY_TABLES = (*EVERY_WRITE_TABLES, "checkpoints")
READ_ONLY_TABLES = ("tokens", "alembic_version")
# Kept up to date by the gateway (when each token was last used).
RECORDED_TABLES = ("token_uses",)


# CREATE ROLE is cluster-wide and races between databases migrated at once; an owner
# without CREATEROLE simply has no runtime role, and the gateway says so at start.
_CREATE_ROLE = f"""
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{RUNTIME_ROLE}') THEN
    CREATE ROLE {RUNTIME_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
  END IF;
EXCEPTION
  WHEN duplicate_object OR unique_violation THEN NULL;
  WHEN insufficient_privilege THEN
    RAISE NOTICE 'no privilege to create role {RUNTIME_ROLE}';
END $$;
"""


def grant_runtime(connection: Connection) -> bool:
    """Create the runtime role if it is missing and grant it what the gateway needs.

    Idempotent; run after every migration so new tables are granted too. Returns
    False when the role does not exist (the owner may not create roles).
    """
    connection.execute(text(_CREATE_ROLE))
    exists = connection.execute(
        text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": RUNTIME_ROLE}
    ).first()
    if exists is None:
        return False
    crossing = connection.execute(
        text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": CROSSING_ROLE}
    ).first()
    roles = [RUNTIME_ROLE] + ([CROSSING_ROLE] if crossing is not None else [])
    statements = [s for role in roles for s in _grants(connection, role)]
    if crossing is not None:
        statements.append(_MAY_CROSS)
    for statement in statements:
        connection.execute(text(statement))
    return True


# The owner may lack the right to grant a role it did not make (another database's owner
# made it): then the gateway's work over every lane finds no rows, and says so.
_MAY_CROSS = f"""
DO $$
BEGIN
  GRANT {CROSSING_ROLE} TO {RUNTIME_ROLE};
EXCEPTION
  WHEN insufficient_privilege OR invalid_grant_operation THEN
    RAISE NOTICE 'no privilege to grant role {CROSSING_ROLE} to {RUNTIME_ROLE}';
END $$;
"""


def _grants(connection: Connection, role: str) -> list[str]:
    """What the gateway's roles are granted (the crossing role as the runtime role)."""
    granted = {
        "SELECT, INSERT": (*APPEND_ONLY_TABLES, *tables("append")),
        "SELECT, INSERT, UPDATE": (*tables("projection"), *RECORDED_TABLES),
        "SELECT, INSERT, DELETE": tables("folded"),
        "SELECT": READ_ONLY_TABLES,
    }
    statements = [
        f"GRANT USAGE ON SCHEMA public TO {role}",
        *(f"GRANT {what} ON {', '.join(on)} TO {role}" for what, on in granted.items() if on),
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}",
        # The one rewrite of history: an erasure's, checked by the function and the
        # tables' triggers (migration 0031); the role updates no history table itself.
        f"GRANT EXECUTE ON FUNCTION edgeloom_erase(text, text, jsonb) TO {role}",
    ]
    version = connection.execute(text("SHOW server_version_num")).scalar_one()
    if int(version) >= MAINTAIN_SINCE:
        # The gateway vacuums the tables its bulk writes changed (store.ledger.upkeep):
        # the first reader of a new page then writes nothing, and index-only scans skip
        # the heap. MAINTAIN lets it VACUUM, ANALYZE, REINDEX, CLUSTER and LOCK, none of
        # which changes a row. Before PostgreSQL 17 only an owner may vacuum.
        maintained = (
            *EVERY_WRITE_TABLES,
            *tables("append"),
            *tables("projection"),
            *tables("folded"),
        )
        statements.append(f"GRANT MAINTAIN ON {', '.join(maintained)} TO {role}")
    return statements


def runtime_url(owner_url: str, explicit: str | None = None) -> str:
    """The URL the gateway serves with: `explicit` when given, else the owner's URL
    with the runtime role as its user (no password: the server's auth must trust it,
    as the embedded server and a local socket do)."""
    if explicit:
        return explicit
    parts = urlsplit(owner_url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{RUNTIME_ROLE}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


async def serving_url(owner_url: str, explicit: str | None = None) -> str:
    """The URL to serve with: the runtime role's when it can log in, else the owner's,
    with a warning that history is then protected by the triggers alone."""
    candidate = runtime_url(owner_url, explicit)
    try:
        conn = await asyncpg.connect(plain_url(candidate), timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        if explicit:
            raise
        log.warning(
            "serving as the migrating role: the runtime role %s cannot log in (%s); "
            "create it and grant it as 'edgeloom migrate' does, or set "
            "EDGELOOM_RUNTIME_DATABASE_URL, so that no code path can alter history",
            RUNTIME_ROLE,
            exc,
        )
        return owner_url
    await conn.close()
    return candidate
