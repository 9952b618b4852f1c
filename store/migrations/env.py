"""Alembic environment: migrations run on the connection `store.operations.migrate` hands over."""

from __future__ import annotations

from alembic import context

from store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise SystemExit("edgeloom migrations run through 'edgeloom migrate' (or at serve start)")
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
