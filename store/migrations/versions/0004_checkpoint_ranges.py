"""Checkpoints name the ledger positions they cover.

Transaction ids decide which entries are settled when a checkpoint is taken, but they
belong to one PostgreSQL cluster; the positions (seq) survive an export and import,
so verification reads those.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # No checkpoint was taken before this revision could be deployed: the default is
    # for form's sake, and the column carries no default afterwards.
    op.execute("ALTER TABLE checkpoints ADD COLUMN covers text NOT NULL DEFAULT ''")
    op.execute("ALTER TABLE checkpoints ALTER COLUMN covers DROP DEFAULT")


def downgrade() -> None:
    op.execute("ALTER TABLE checkpoints DROP COLUMN covers")
