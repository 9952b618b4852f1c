"""Corrections as a ledgered kind with their projection; per-label record counts.

- `corrections`: the projection of the ledger's "correction" entries;
- `label_counts` and `label_deltas`: how many current records carry each label per
  lane, moved by writers through append-only deltas and folded off the write path;
  filled here from the current memberships.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "corrections",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("record_id", sa.Text(collation="C"), nullable=False),
        sa.Column("record_version", sa.Integer(), nullable=False),
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("at", TZ, nullable=False),
        sa.Column("ledger_hash", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_corrections"),
    )
    op.create_index("ix_corrections_record_id_at", "corrections", ["record_id", "at"])
    op.create_table(
        "label_counts",
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("lane", "label", name="pk_label_counts"),
    )
    op.create_table(
        "label_deltas",
        sa.Column("seq", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("delta", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_label_deltas"),
    )
    op.execute(
        r"""
        INSERT INTO label_counts (lane, label, records)
        SELECT lane, label, count(DISTINCT record_id) FROM edge_properties
        WHERE recorded_to IS NULL AND label NOT LIKE 'e\_%'
        GROUP BY lane, label
        """
    )


def downgrade() -> None:
    op.drop_table("label_deltas")
    op.drop_table("label_counts")
    op.drop_index("ix_corrections_record_id_at", table_name="corrections")
    op.drop_table("corrections")
