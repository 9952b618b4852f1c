"""A record can be retired: when, by whom and why, on its projection row.

A retired record is a new version of the record (its tombstone), never a delete; the
projection keeps the row, with `retired_at` set, and closes its memberships. Every
current read leaves out a row whose `retired_at` is set, so the indexes current reads
scan by lane hold only the rows that are not retired: counting a lane's records stays
an index-only scan.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_LIVE = sa.text("retired_at IS NULL")


def upgrade() -> None:
    tz = sa.DateTime(timezone=True)
    op.add_column("records", sa.Column("retired_at", tz, nullable=True))
    op.add_column("records", sa.Column("retired_by", sa.Text(), nullable=True))
    op.add_column("records", sa.Column("retired_reason", sa.Text(), nullable=True))
    op.drop_index("ix_records_lane", table_name="records")
    op.drop_index("ix_records_lane_created_at_id", table_name="records")
    op.create_index(
        "ix_records_lane_created_at_id",
        "records",
        ["lane", "created_at", "id"],
        postgresql_where=_LIVE,
    )
    op.create_index("ix_records_lane", "records", ["lane"], postgresql_where=_LIVE)


def downgrade() -> None:
    op.drop_index("ix_records_lane", table_name="records")
    op.drop_index("ix_records_lane_created_at_id", table_name="records")
    op.create_index("ix_records_lane_created_at_id", "records", ["lane", "created_at", "id"])
    op.create_index("ix_records_lane", "records", ["lane"])
    op.drop_column("records", "retired_reason")
    op.drop_column("records", "retired_by")
    op.drop_column("records", "retired_at")
