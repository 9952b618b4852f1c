"""A record's names (its title metadata and `alias` properties, in lower case) as one
function of its properties, with a GIN index over current records: `records(named:)`.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

FUNCTION = r"""
CREATE FUNCTION edgeloom_record_names(properties jsonb) RETURNS text[]
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT coalesce(array_agg(DISTINCT lower(btrim(p->>1))), '{}'::text[])
        FROM jsonb_array_elements(properties) AS p
        WHERE p->>0 IN ('e_meta_title', 'alias') $$
"""


def upgrade() -> None:
    op.execute(FUNCTION)
    op.execute(
        "CREATE INDEX ix_records_names ON records USING gin (edgeloom_record_names(properties)) "
        "WHERE retired_at IS NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX ix_records_names")
    op.execute("DROP FUNCTION edgeloom_record_names(jsonb)")
