"""Typed edges: the projection of the ledger's "edge" entries.

One row per edge, as its newest ledger entry leaves it (earlier states are read from
the ledger: `store.kinds.edge`). `lane` is the from record's and `to_lane` the to
record's, so the visibility rule shows an edge only to a reader of both. The live key
`(from_id, to_id, type, namespace)` is unique among edges not retired.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)
ID = sa.Text(collation="C")


def upgrade() -> None:
    op.create_table(
        "edges",
        sa.Column("id", ID, nullable=False),
        sa.Column("from_id", ID, nullable=False),
        sa.Column("to_id", ID, nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("to_lane", sa.Text(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("provenance_actor", sa.Text(), nullable=False),
        sa.Column("provenance_type", sa.Text(), nullable=False),
        sa.Column("evidence", JSONB(), nullable=True),
        sa.Column("detector", sa.Text(), nullable=False),
        sa.Column("conflict_state", sa.Text(), nullable=True),
        sa.Column("resolution", sa.Text(), nullable=True),
        sa.Column("resolver", sa.Text(), nullable=True),
        sa.Column("winner_id", ID, nullable=True),
        sa.Column("valid_at", TZ, nullable=False),
        sa.Column("invalid_at", TZ, nullable=True),
        sa.Column("expired_at", TZ, nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("ledger_hash", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_edges"),
    )
    op.create_index("ix_edges_from_id_type", "edges", ["from_id", "type"])
    op.create_index("ix_edges_to_id_type", "edges", ["to_id", "type"])
    op.create_index("ix_edges_type_namespace", "edges", ["type", "namespace"])
    op.create_index(
        "uq_edges_live_key",
        "edges",
        ["from_id", "to_id", "type", "namespace"],
        unique=True,
        postgresql_where=sa.text("expired_at IS NULL"),
    )
    # The review queue: contradictions, oldest first.
    op.create_index(
        "ix_edges_conflicts",
        "edges",
        ["conflict_state", "created_at", "id"],
        postgresql_where=sa.text("type = 'contradicts'"),
    )


def downgrade() -> None:
    op.drop_table("edges")
