"""The gateway may have its tables analyzed, which only their owner may do.

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


def upgrade() -> None:
    op.execute(ANALYZE)


def downgrade() -> None:
    op.execute("DROP FUNCTION edgeloom_analyze(text[])")
