"""The membership history index keyed by record, as the current one is.

A read as of an instant T (`gather`, `edgeProperty`, `labels` ... `asOf`) takes the
memberships of a value held at T: `recorded_from <= T` and `recorded_to` absent or later.
Keyed `(lane, label, value_key, recorded_from)`, the index held neither `record_id` nor
`recorded_to`, so every membership of the value was a visit to the heap, and the two
sides of an intersection, ordered by time, met in a hash join. Keyed by record with both
times included, the read is an index-only scan in record order, as the current index
gives a read now: the two sides merge (bench/README.md, ninth pass).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_edge_properties_history", table_name="edge_properties")
    op.create_index(
        "ix_edge_properties_history",
        "edge_properties",
        ["lane", "label", "value_key", "record_id"],
        postgresql_include=["recorded_from", "recorded_to"],
    )


def downgrade() -> None:
    op.drop_index("ix_edge_properties_history", table_name="edge_properties")
    op.create_index(
        "ix_edge_properties_history",
        "edge_properties",
        ["lane", "label", "value_key", "recorded_from"],
    )
