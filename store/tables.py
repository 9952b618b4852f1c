"""The database schema as SQLAlchemy Core tables; migrations create the same shape."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

TZ = DateTime(timezone=True)

# Append-only: one entry per record version, holding the record's whole state.
# A trigger (see the migration) refuses UPDATE and DELETE.
ledger = Table(
    "ledger",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=True),
    Column("record_id", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("event", Text, nullable=False),
    Column("actor", Text, nullable=False),
    Column("at", TZ, nullable=False),
    Column("policy_version", Integer, nullable=False),
    Column("state", JSONB, nullable=False),
    Column("prev_hash", Text, nullable=True),
    Column("hash", Text, nullable=False),
    Index("uq_ledger_record_id_version", "record_id", "version", unique=True),
)

# Projection: the latest version of each record.
records = Table(
    "records",
    metadata,
    # "C" collation: ids sort bytewise, so a prefix is a primary-key range scan.
    Column("id", Text(collation="C"), primary_key=True),
    Column("lane", Text, nullable=False),
    Column("source_type", Text, nullable=False),
    Column("authority", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("properties", JSONB, nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("updated_at", TZ, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("idempotency_key", Text, nullable=True),
    Column("ledger_hash", Text, nullable=False),
    Index("ix_records_lane_created_at_id", "lane", "created_at", "id"),
    Index(
        "uq_records_created_by_idempotency_key",
        "created_by",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
)

# Projection: hyperedge membership with validity intervals, so a gather at any
# point in time is an index scan. The current membership has valid_to NULL.
edge_properties = Table(
    "edge_properties",
    metadata,
    Column("id", Text, nullable=False),
    Column("record_id", Text, nullable=False),
    Column("lane", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("value", Text, nullable=False),
    Column("valid_from", TZ, nullable=False),
    Column("valid_to", TZ, nullable=True),
    Column("from_version", Integer, nullable=False),
    Column("to_version", Integer, nullable=True),
    Index("uq_edge_properties_id_from_version", "id", "from_version", unique=True),
    Index(
        "ix_edge_properties_current",
        "label",
        "value",
        "lane",
        "record_id",
        postgresql_where=text("valid_to IS NULL"),
    ),
    Index("ix_edge_properties_history", "label", "value", "valid_from"),
    Index("ix_edge_properties_record_id", "record_id"),
)

audit_events = Table(
    "audit_events",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=True),
    Column("id", Text, nullable=False, unique=True),
    Column("kind", Text, nullable=False),
    Column("record_id", Text, nullable=True),
    Column("lane", Text, nullable=True),
    Column("actor", Text, nullable=False),
    Column("at", TZ, nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("version_before", Integer, nullable=True),
    Column("version_after", Integer, nullable=True),
    # Transaction id, so the live feed can tell which events are visible to
    # every snapshot even when commits land out of sequence order.
    Column("txid", Text, nullable=False, server_default=text("pg_current_xact_id()::text")),
    Index("ix_audit_events_record_id_seq", "record_id", "seq"),
)

# The policy ledger: every applied policy is a new version; policy_head names
# the one in force and is the row writers share-lock.
policy_versions = Table(
    "policy_versions",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("yaml", Text, nullable=False),
    Column("applied_at", TZ, nullable=False),
    Column("applied_by", Text, nullable=False),
)

policy_head = Table(
    "policy_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("version", Integer, nullable=False),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", Text, primary_key=True),
    Column("agent", Text, nullable=False),
    Column("token_hash", Text, nullable=False, unique=True),
    Column("created_at", TZ, nullable=False),
    Column("revoked_at", TZ, nullable=True),
)
