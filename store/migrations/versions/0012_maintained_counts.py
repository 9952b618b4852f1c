"""Counts the write path maintains: current records per lane and source type, and
current members of each edge-property value per lane.

Kept as `label_counts` is: writers append signed deltas (`record_deltas`,
`member_deltas`) in their own transaction, and the deltas are folded into the counts
after commit; a read adds the unfolded deltas to the folded counts, so `records {
totalCount }`, a one-property `gather`'s count, `memberCount` and a clipped hub's count
read a few rows however many records there are. `value_key` is the membership
indexes' key of the value (migration 0009). Filled here from the current rows.

Revision ID: 0012
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0014"
branch_labels = None
depends_on = None

KEY = sa.Text(collation="C")


def upgrade() -> None:
    op.create_table(
        "record_counts",
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("source_type", sa.Text(), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("lane", "source_type", name="pk_record_counts"),
    )
    op.create_table(
        "record_deltas",
        sa.Column("seq", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("source_type", sa.Text(), nullable=False),
        sa.Column("delta", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_record_deltas"),
    )
    op.create_table(
        "member_counts",
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("value_key", KEY, nullable=False),
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("label", "value_key", "lane", name="pk_member_counts"),
    )
    op.create_table(
        "member_deltas",
        sa.Column("seq", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("value_key", KEY, nullable=False),
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("delta", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_member_deltas"),
    )
    op.create_index("ix_member_deltas_value", "member_deltas", ["label", "value_key"])
    op.execute(
        "INSERT INTO record_counts (lane, source_type, records) "
        "SELECT lane, source_type, count(*) FROM records WHERE retired_at IS NULL "
        "GROUP BY lane, source_type"
    )
    op.execute(
        "INSERT INTO member_counts (label, value_key, lane, value, records) "
        "SELECT label, value_key, lane, min(value), count(*) FROM edge_properties "
        "WHERE recorded_to IS NULL GROUP BY label, value_key, lane"
    )


def downgrade() -> None:
    op.drop_table("member_deltas")
    op.drop_table("member_counts")
    op.drop_table("record_deltas")
    op.drop_table("record_counts")
