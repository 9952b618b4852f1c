"""Membership indexes hold a value's key, not the value.

A btree row holds at most about 2.7 kB, and an edge-property value may be 1024
characters of up to 4 bytes each: such a value could not be indexed, and its write
failed. `value_key` is the value itself up to 1024 bytes (every ASCII value the limit
allows), and beyond that U+0001 and the hex SHA-256 of its UTF-8 bytes: no value holds
a control character, so the two forms never meet. Reads compare
`value_key = edgeloom_value_key(:value)`, an index condition; the function inlines to
its CASE, so a short value costs no call.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# convert_to is STABLE only because it could depend on the database's encoding, which
# never changes under a database: declared IMMUTABLE so a generated column may use it.
# edgeloom_value_key is not STRICT: PostgreSQL inlines a strict function only when its
# body is strict, and a CASE is not.
FUNCTIONS = (
    r"""
CREATE FUNCTION edgeloom_sha256_hex(value text) RETURNS text
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT encode(sha256(convert_to(value, 'UTF8')), 'hex') $$
""",
    r"""
CREATE FUNCTION edgeloom_value_key(value text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT CASE WHEN octet_length(value) <= 1024 THEN value
                    ELSE E'\x01' || edgeloom_sha256_hex(value) END $$
""",
)


def upgrade() -> None:
    for function in FUNCTIONS:
        op.execute(function)
    op.drop_index("ix_edge_properties_current", table_name="edge_properties")
    op.drop_index("ix_edge_properties_history", table_name="edge_properties")
    op.execute(
        'ALTER TABLE edge_properties ADD COLUMN value_key text COLLATE "C" NOT NULL '
        "GENERATED ALWAYS AS (edgeloom_value_key(value)) STORED"
    )
    op.create_index(
        "ix_edge_properties_current",
        "edge_properties",
        ["lane", "label", "value_key", "record_id"],
        postgresql_where=sa.text("recorded_to IS NULL"),
    )
    op.create_index(
        "ix_edge_properties_history",
        "edge_properties",
        ["lane", "label", "value_key", "recorded_from"],
    )


def downgrade() -> None:
    op.drop_index("ix_edge_properties_current", table_name="edge_properties")
    op.drop_index("ix_edge_properties_history", table_name="edge_properties")
    op.execute("ALTER TABLE edge_properties DROP COLUMN value_key")
    op.execute("DROP FUNCTION edgeloom_value_key(text)")
    op.execute("DROP FUNCTION edgeloom_sha256_hex(text)")
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
