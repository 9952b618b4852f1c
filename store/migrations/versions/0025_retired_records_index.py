"""An index of the retired records' ids, for the typed edges' visibility rule.

Every read of typed edges now leaves out an edge either of whose records is retired:
for each edge, a lookup of both ends. On the primary key that is two index descents
and two heap fetches an edge (8 buffers), for every edge a read filters or counts:
the review queue at 4,000 edges spent three quarters of its statement there. The
retired records alone are few; their ids in a partial index make each lookup one or
two pages, read from the index alone, and let the planner hash them once when there
are only a few.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_records_retired", "records", ["id"], postgresql_where=sa.text("retired_at IS NOT NULL")
    )


def downgrade() -> None:
    op.drop_index("ix_records_retired", table_name="records")
