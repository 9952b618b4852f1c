"""Checkpoints are signed over every field.

Earlier signatures covered seq, covers, entries, prev_hash and hash, not the range a
checkpoint ends at (`below_txid`), which the next one starts from, nor its time or key
id. Those checkpoints keep `signed_format = 1` and are checked by the bytes they were
signed over; new ones carry 2.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE checkpoints ADD COLUMN signed_format smallint NOT NULL DEFAULT 1")
    op.execute("ALTER TABLE checkpoints ALTER COLUMN signed_format SET DEFAULT 2")


def downgrade() -> None:
    op.execute("ALTER TABLE checkpoints DROP COLUMN signed_format")
