"""Membership indexes lead with the lane.

PostgreSQL 15 applies `lane = ANY(...)` as a filter after the index scan when the
lane is not the leading column, so a probe on another lane's popular value read
every one of its members: a timing difference between "exists elsewhere" and "does
not exist". Leading with the lane makes it an index condition on every version.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_edge_properties_current", table_name="edge_properties")
    op.drop_index("ix_edge_properties_history", table_name="edge_properties")
    op.create_index(
        "ix_edge_properties_current",
        "edge_properties",
        ["lane", "label", "value", "record_id"],
        postgresql_where=sa.text("recorded_to IS NULL"),
    )
    op.create_index(
        "ix_edge_properties_history",
        "edge_properties",
        ["lane", "label", "value", "recorded_from"],
    )


def downgrade() -> None:
    op.drop_index("ix_edge_properties_current", table_name="edge_properties")
    op.drop_index("ix_edge_properties_history", table_name="edge_properties")
    op.create_index(
        "ix_edge_properties_current",
        "edge_properties",
        ["label", "value", "lane", "record_id"],
        postgresql_where=sa.text("recorded_to IS NULL"),
    )
    op.create_index(
        "ix_edge_properties_history", "edge_properties", ["label", "value", "lane", "recorded_from"]
    )
