"""The migrations build exactly the schema tables.py describes."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection

from store.database import create_engine
from store.tables import metadata
from tests.support import Databases


def _diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection)
    return list(compare_metadata(context, metadata))


async def test_migrated_database_matches_table_definitions(databases: Databases) -> None:
    engine = create_engine(await databases.create(), pool_size=1)
    try:
        async with engine.connect() as conn:
            diff = await conn.run_sync(_diff)
    finally:
        await engine.dispose()
    assert diff == []
