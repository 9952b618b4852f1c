"""Applying the Alembic migrations, safely from several gateway processes at once."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

import store.kinds  # noqa: F401  (registers the built-in kinds)
from store.operations.roles import grant_runtime

MIGRATIONS = Path(__file__).parent.parent / "migrations"
# Any fixed number: replicas starting together queue on it instead of racing.
_MIGRATION_LOCK = 7_113_003


def _config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def _upgrade(connection: Connection) -> None:
    connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
    command.upgrade(_config(connection), "head")
    # Every time, not once: tables a later revision adds are granted too.
    grant_runtime(connection)


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to the newest revision."""
    async with engine.begin() as conn:
        await conn.run_sync(_upgrade)
