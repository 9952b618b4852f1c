"""A narrow index on records(lane), for counting a lane's records.

`records { totalCount }` counts every record of the readable lanes. Read from the
(lane, created_at, id) index, that scans about 10 MB per 100k records; the lane alone
deduplicates to well under 1 MB, and the same count takes less than half the time
(bench/README.md has the figures).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_records_lane", "records", ["lane"])


def downgrade() -> None:
    op.drop_index("ix_records_lane", table_name="records")
