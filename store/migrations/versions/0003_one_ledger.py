"""One ledger for every ledgered kind, append-only audit events, checkpoints.

- ledger entries are keyed by (kind, object_id, version); policy versions become
  ledger entries of kind "policy" (policy_versions stays as their projection);
- entries carry the transaction id (xid8) and the format of their hash; entries
  written before this revision keep format 1;
- audit events name the entry they report, their txid is xid8, and they are
  append-only like the ledger;
- edge-property intervals are transaction time: valid_from/valid_to become
  recorded_from/recorded_to, and the history index holds the lane;
- every column holding a record id sorts bytewise (COLLATE "C");
- checkpoints anchor all chains together.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def _hash_v2(fields: dict[str, Any]) -> str:
    """Format 2 of the entry hash, frozen here as docs/ledger.md specifies it."""
    body = dict(fields)
    at: datetime = body["at"]
    body["at"] = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _append_only(table: str) -> None:
    op.execute(
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION edgeloom_append_only()"
    )
    op.execute(
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION edgeloom_append_only()"
    )


def upgrade() -> None:
    # -- ledger ---------------------------------------------------------------
    op.drop_index("uq_ledger_record_id_version", table_name="ledger")
    op.execute("ALTER TABLE ledger RENAME COLUMN record_id TO object_id")
    op.execute('ALTER TABLE ledger ALTER COLUMN object_id TYPE text COLLATE "C"')
    op.execute("ALTER TABLE ledger ADD COLUMN kind text NOT NULL DEFAULT 'record'")
    op.execute("ALTER TABLE ledger ALTER COLUMN kind DROP DEFAULT")
    op.execute("ALTER TABLE ledger ADD COLUMN hash_format smallint NOT NULL DEFAULT 1")
    op.execute("ALTER TABLE ledger ALTER COLUMN hash_format SET DEFAULT 2")
    op.execute("ALTER TABLE ledger ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id()")
    op.create_index(
        "uq_ledger_kind_object_id_version", "ledger", ["kind", "object_id", "version"], unique=True
    )
    op.create_index("ix_ledger_txid", "ledger", ["txid"])

    # Policy versions become ledger entries of kind "policy", chained like records.
    bind = op.get_bind()
    prev: str | None = None
    rows = bind.execute(
        sa.text("SELECT version, yaml, applied_at, applied_by FROM policy_versions ORDER BY 1")
    ).all()
    for version, yaml_text, applied_at, applied_by in rows:
        fields = {
            "kind": "policy",
            "id": "policy",
            "version": version,
            "event": "policy_applied",
            "actor": applied_by,
            "at": applied_at,
            "policy_version": version - 1,
            "state": {"yaml": yaml_text},
            "prev_hash": prev,
        }
        digest = _hash_v2(fields)
        bind.execute(
            sa.text(
                "INSERT INTO ledger (kind, object_id, version, event, actor, at, policy_version,"
                " state, prev_hash, hash) VALUES ('policy', 'policy', :v, 'policy_applied', :a,"
                " :at, :pv, CAST(:s AS jsonb), :p, :h)"
            ),
            {
                "v": version,
                "a": applied_by,
                "at": applied_at,
                "pv": version - 1,
                "s": json.dumps({"yaml": yaml_text}),
                "p": prev,
                "h": digest,
            },
        )
        prev = digest

    # -- edge properties ------------------------------------------------------
    op.execute("ALTER TABLE edge_properties RENAME COLUMN valid_from TO recorded_from")
    op.execute("ALTER TABLE edge_properties RENAME COLUMN valid_to TO recorded_to")
    op.execute('ALTER TABLE edge_properties ALTER COLUMN record_id TYPE text COLLATE "C"')
    op.drop_index("ix_edge_properties_history", table_name="edge_properties")
    op.create_index(
        "ix_edge_properties_history",
        "edge_properties",
        ["label", "value", "lane", "recorded_from"],
    )

    # -- audit events ---------------------------------------------------------
    op.execute("ALTER TABLE audit_events ALTER COLUMN txid DROP DEFAULT")
    op.execute("ALTER TABLE audit_events ALTER COLUMN txid TYPE xid8 USING txid::xid8")
    op.execute("ALTER TABLE audit_events ALTER COLUMN txid SET DEFAULT pg_current_xact_id()")
    op.execute('ALTER TABLE audit_events ALTER COLUMN record_id TYPE text COLLATE "C"')
    op.execute("ALTER TABLE audit_events ADD COLUMN object_kind text")
    op.execute('ALTER TABLE audit_events ADD COLUMN object_id text COLLATE "C"')
    op.execute(
        "UPDATE audit_events SET object_kind = 'record', object_id = record_id "
        "WHERE record_id IS NOT NULL"
    )
    op.execute(
        "UPDATE audit_events SET object_kind = 'policy', object_id = 'policy', "
        "version_after = (payload->>'version')::int, "
        "version_before = NULLIF((payload->>'previousVersion')::int, 0) "
        "WHERE record_id IS NULL"
    )
    op.execute("ALTER TABLE audit_events ALTER COLUMN object_kind SET NOT NULL")
    op.execute("ALTER TABLE audit_events ALTER COLUMN object_id SET NOT NULL")
    op.create_index("ix_audit_events_txid", "audit_events", ["txid"])
    op.create_index(
        "ix_audit_events_object_kind_object_id_version_after",
        "audit_events",
        ["object_kind", "object_id", "version_after"],
    )
    _append_only("audit_events")

    # -- checkpoints ----------------------------------------------------------
    op.execute(
        """
        CREATE TABLE checkpoints (
            seq integer NOT NULL,
            below_txid xid8 NOT NULL,
            entries bigint NOT NULL,
            at timestamptz NOT NULL,
            prev_hash text,
            hash text NOT NULL,
            signature text,
            key_id text,
            CONSTRAINT pk_checkpoints PRIMARY KEY (seq)
        )
        """
    )
    _append_only("checkpoints")


def downgrade() -> None:
    raise NotImplementedError("the ledger is append-only; restore from an export instead")
