"""The migrations build exactly the schema tables.py describes."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection
from sqlalchemy.dialects.postgresql import ARRAY, REAL

from store.database import create_engine
from store.tables import Vector, metadata
from tests.support import Databases


def _same_type(
    context: object, inspected: object, described: object, found: object, declared: object
) -> bool | None:
    # A server without pgvector keeps the vectors as real[] (migration 0023).
    if isinstance(declared, Vector):
        vector = isinstance(found, Vector)
        return not (vector or (isinstance(found, ARRAY) and isinstance(found.item_type, REAL)))
    return None  # the usual comparison


def _diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": _same_type})
    return list(compare_metadata(context, metadata))


async def test_migrated_database_matches_table_definitions(databases: Databases) -> None:
    engine = create_engine(await databases.create(), pool_size=1)
    try:
        async with engine.connect() as conn:
            diff = await conn.run_sync(_diff)
    finally:
        await engine.dispose()
    assert diff == []
