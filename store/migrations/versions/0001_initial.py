"""Ledger, projections, audit events, policy ledger and tokens.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)

APPEND_ONLY = """
CREATE FUNCTION edgeloom_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'table % is append-only: % is refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege';
END $$;
"""


def upgrade() -> None:
    op.create_table(
        "ledger",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("record_id", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("at", TZ, nullable=False),
        sa.Column("policy_version", sa.Integer, nullable=False),
        sa.Column("state", JSONB, nullable=False),
        sa.Column("prev_hash", sa.Text, nullable=True),
        sa.Column("hash", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_ledger"),
    )
    op.create_index("uq_ledger_record_id_version", "ledger", ["record_id", "version"], unique=True)
    op.execute(APPEND_ONLY)
    op.execute(
        "CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger "
        "FOR EACH ROW EXECUTE FUNCTION edgeloom_append_only()"
    )

    op.create_table(
        "records",
        sa.Column("id", sa.Text(collation="C"), nullable=False),
        sa.Column("lane", sa.Text, nullable=False),
        sa.Column("source_type", sa.Text, nullable=False),
        sa.Column("authority", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("properties", JSONB, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("idempotency_key", sa.Text, nullable=True),
        sa.Column("ledger_hash", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_records"),
    )
    op.create_index("ix_records_lane_created_at_id", "records", ["lane", "created_at", "id"])
    op.create_index(
        "uq_records_created_by_idempotency_key",
        "records",
        ["created_by", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )

    op.create_table(
        "edge_properties",
        sa.Column("id", sa.Text, nullable=False),
        sa.Column("record_id", sa.Text, nullable=False),
        sa.Column("lane", sa.Text, nullable=False),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("valid_from", TZ, nullable=False),
        sa.Column("valid_to", TZ, nullable=True),
        sa.Column("from_version", sa.Integer, nullable=False),
        sa.Column("to_version", sa.Integer, nullable=True),
    )
    op.create_index(
        "uq_edge_properties_id_from_version",
        "edge_properties",
        ["id", "from_version"],
        unique=True,
    )
    op.create_index(
        "ix_edge_properties_current",
        "edge_properties",
        ["label", "value", "lane", "record_id"],
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.create_index(
        "ix_edge_properties_history", "edge_properties", ["label", "value", "valid_from"]
    )
    op.create_index("ix_edge_properties_record_id", "edge_properties", ["record_id"])

    op.create_table(
        "audit_events",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("id", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("record_id", sa.Text, nullable=True),
        sa.Column("lane", sa.Text, nullable=True),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("at", TZ, nullable=False),
        sa.Column("payload", JSONB, nullable=False),
        sa.Column("version_before", sa.Integer, nullable=True),
        sa.Column("version_after", sa.Integer, nullable=True),
        sa.Column(
            "txid", sa.Text, nullable=False, server_default=sa.text("pg_current_xact_id()::text")
        ),
        sa.PrimaryKeyConstraint("seq", name="pk_audit_events"),
        sa.UniqueConstraint("id", name="uq_audit_events_id"),
    )
    op.create_index("ix_audit_events_record_id_seq", "audit_events", ["record_id", "seq"])

    op.create_table(
        "policy_versions",
        sa.Column("version", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("yaml", sa.Text, nullable=False),
        sa.Column("applied_at", TZ, nullable=False),
        sa.Column("applied_by", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("version", name="pk_policy_versions"),
    )
    op.execute(
        "CREATE TRIGGER policy_versions_append_only BEFORE UPDATE OR DELETE ON policy_versions "
        "FOR EACH ROW EXECUTE FUNCTION edgeloom_append_only()"
    )
    op.create_table(
        "policy_head",
        sa.Column("id", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_policy_head"),
    )
    # Version 0 means no policy yet: every write is refused until one is applied.
    op.execute("INSERT INTO policy_head (id, version) VALUES (1, 0)")

    op.create_table(
        "tokens",
        sa.Column("id", sa.Text, nullable=False),
        sa.Column("agent", sa.Text, nullable=False),
        sa.Column("token_hash", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("revoked_at", TZ, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_tokens_token_hash"),
    )


def downgrade() -> None:
    for table in (
        "tokens",
        "policy_head",
        "policy_versions",
        "audit_events",
        "edge_properties",
        "records",
        "ledger",
    ):
        op.drop_table(table)
    op.execute("DROP FUNCTION edgeloom_append_only()")
