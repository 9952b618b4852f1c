"""A record may expire: the instant it is treated as retired, on its projection row.

`expires_at` is the instant of the record's newest version (its state's `expires_at`);
from it on, every read treats the record as retired, whether or not the gateway has
written its tombstone yet. Two partial indexes serve the reads: the pending expiries
(not retired yet), which current reads and counts subtract at read time, and every
expiry ever set, which reads at an earlier instant consult.

`edgeloom_now()` is the instant current reads compare expiries with: `now()`, the
transaction's start. It is a function of its own so that a test can replace it and
move the reads' clock (`CREATE OR REPLACE FUNCTION`, which invalidates cached plans).

Revision ID: 0030
Revises: 0028
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0028"
branch_labels = None
depends_on = None

NOW_FUNCTION = """
CREATE OR REPLACE FUNCTION edgeloom_now() RETURNS timestamptz
  LANGUAGE sql STABLE PARALLEL SAFE AS $$ SELECT now() $$
"""


def upgrade() -> None:
    op.execute(NOW_FUNCTION)
    op.add_column("records", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_records_expiring",
        "records",
        ["expires_at", "id"],
        postgresql_where=sa.text("retired_at IS NULL AND expires_at IS NOT NULL"),
    )
    op.create_index(
        "ix_records_expires_at",
        "records",
        ["expires_at", "id"],
        postgresql_where=sa.text("expires_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_records_expires_at", table_name="records")
    op.drop_index("ix_records_expiring", table_name="records")
    op.drop_column("records", "expires_at")
    op.execute("DROP FUNCTION edgeloom_now()")
