"""The gateway may have its tables analyzed, which only their owner may do; the count
deltas are vacuumed after a large fold.

The gateway serves as a role that owns no table (store.operations.roles), and ANALYZE
of a table not owned is skipped with a warning (PostgreSQL 15 has no privilege to grant
for it). `edgeloom_analyze` runs as the owner and analyzes only the named tables that
are edgeloom's own, in the public schema: right after a bulk write the gateway has
them analyzed in the background (store.ledger.upkeep), instead of waiting for
autovacuum while every read is planned for tables believed empty.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

ANALYZE = r"""
CREATE FUNCTION edgeloom_analyze(tables text[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE t text;
BEGIN
  FOR t IN
    SELECT c.relname FROM pg_class c
    WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
      AND c.relowner = (SELECT current_user::regrole) AND c.relname = ANY(tables)
    ORDER BY c.relname
  LOOP
    EXECUTE format('ANALYZE public.%I', t);
  END LOOP;
END $$;
"""


# The count fold deletes every delta row it folds. Autovacuum vacuums a table after
# 50 dead rows and a fifth of its size, which for tables emptied at every fold
# means after every fold however small, or, sized by a large load, far too late: so
# after this many dead rows, whatever the size (the threshold of store.ledger.upkeep).
DELTAS = ("label_deltas", "record_deltas", "member_deltas")
DEAD_ROWS = 10_000


def upgrade() -> None:
    op.execute(ANALYZE)
    for table in DELTAS:
        op.execute(
            f"ALTER TABLE {table} SET (autovacuum_vacuum_scale_factor = 0, "
            f"autovacuum_vacuum_threshold = {DEAD_ROWS})"
        )


def downgrade() -> None:
    for table in DELTAS:
        op.execute(
            f"ALTER TABLE {table} RESET (autovacuum_vacuum_scale_factor, "
            "autovacuum_vacuum_threshold)"
        )
    op.execute("DROP FUNCTION edgeloom_analyze(text[])")
