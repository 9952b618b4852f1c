"""Vectors: `record_vectors`, the vector of each record version, and its indexes' maker.

Where the server offers pgvector the extension is created and the column is a `vector`
(of any size: each size gets its own partial HNSW index when a policy declares it,
`edgeloom_vector_index(size)`, a function run as this migration's owner so that the
serving role, which owns no table, can ask for it at the gateway's start); the database
defaults to pgvector's iterative index scans (relaxed order), so that a filtered search
still finds as many hits as it asks for (walking at most 100,000 index entries), and
to a search list of 100 candidates.

Where it does not, the column is `real[]` and the function makes no index: the rows are
kept alike (the vectors are in the ledger regardless), and vector search is off.
No record had a vector before this revision, so there is nothing to fill.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_INDEX_FUNCTION = """
CREATE FUNCTION edgeloom_vector_index(size int) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
  SET maintenance_work_mem = '256MB'
  AS $$
BEGIN
  IF (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
      WHERE attrelid = 'record_vectors'::regclass AND attname = 'embedding') <> 'vector' THEN
    RETURN;
  END IF;
  -- Gateways starting together make it once.
  PERFORM pg_advisory_xact_lock(7113004);
  EXECUTE format(
    'CREATE INDEX IF NOT EXISTS %I ON record_vectors USING hnsw '
    '((embedding::vector(%s)) vector_cosine_ops) WHERE dims = %s',
    'ix_record_vectors_hnsw_' || size, size, size);
END $$
"""
_SEARCH_DEFAULTS = """
DO $$ BEGIN
  EXECUTE format('ALTER DATABASE %I SET hnsw.iterative_scan = relaxed_order',
                 current_database());
  EXECUTE format('ALTER DATABASE %I SET hnsw.ef_search = 100', current_database());
  EXECUTE format('ALTER DATABASE %I SET hnsw.max_scan_tuples = 100000', current_database());
END $$
"""


def _with_pgvector() -> bool:
    bind = op.get_bind()
    offered = bind.execute(
        sa.text("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
    ).scalar()
    if not offered:
        return False
    try:
        with bind.begin_nested():
            op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except sa.exc.DBAPIError:
        return False  # offered, but this role may not create it: vector search stays off
    try:
        with bind.begin_nested():
            op.execute(_SEARCH_DEFAULTS)
    except sa.exc.DBAPIError:
        pass  # not the database's owner: searches run with pgvector's defaults
    return True


def upgrade() -> None:
    vector = _with_pgvector()
    op.create_table(
        "record_vectors",
        sa.Column("record_id", sa.Text(collation="C"), nullable=False),
        sa.Column("from_version", sa.Integer(), nullable=False),
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("source_type", sa.Text(), nullable=False),
        sa.Column("recorded_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("dims", sa.SmallInteger(), nullable=False),
        sa.Column(
            "embedding",
            sa.ARRAY(sa.REAL()),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("record_id", "from_version", name="pk_record_vectors"),
    )
    if vector:
        op.execute(
            "ALTER TABLE record_vectors ALTER COLUMN embedding TYPE vector USING embedding::vector"
        )
    op.execute(_INDEX_FUNCTION)


def downgrade() -> None:
    op.execute("DROP FUNCTION edgeloom_vector_index(int)")
    op.drop_table("record_vectors")
