"""Vectors: an HNSW index per lane and size, instead of one per size shared by every lane.

A graph shared by the lanes let one lane's dense cluster of vectors (one vector written
two thousand times) capture a walk started for another lane: the walk could not leave
the cluster, and a search of that other lane found nothing. Each lane's vectors now
have their own graph (a partial index `WHERE lane = ... AND dims = ...`), so what a
search finds in a lane depends on that lane's vectors alone.

`edgeloom_vector_index(lane, size)` replaces `edgeloom_vector_index(size)`, run as this
migration's owner as before (the serving role owns no table); the shared indexes are
dropped here, and the gateway's start makes each lane's, for the lanes whose embedding
the policy declares. Until then a search compares the lane's vectors exactly.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

# The index's name holds the lane when it fits in PostgreSQL's 63 bytes, else its md5.
_INDEX_FUNCTION = """
CREATE FUNCTION edgeloom_vector_index(lane text, size int) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
  SET maintenance_work_mem = '256MB'
  AS $$
DECLARE
  name text := format('ix_record_vectors_%s_%s', size, lane);
BEGIN
  IF (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
      WHERE attrelid = 'record_vectors'::regclass AND attname = 'embedding') <> 'vector' THEN
    RETURN;
  END IF;
  IF octet_length(name) > 63 THEN
    name := format('ix_record_vectors_%s_%s', size, md5(lane));
  END IF;
  -- Gateways starting together make it once.
  PERFORM pg_advisory_xact_lock(7113004);
  EXECUTE format(
    'CREATE INDEX IF NOT EXISTS %I ON record_vectors USING hnsw '
    '((embedding::vector(%s)) vector_cosine_ops) WHERE lane = %L AND dims = %s',
    name, size, lane, size);
END $$
"""
_DROP = """
DO $$ DECLARE i text; BEGIN
  FOR i IN SELECT indexname FROM pg_indexes
           WHERE tablename = 'record_vectors' AND indexname LIKE {pattern} LOOP
    EXECUTE format('DROP INDEX %I', i);
  END LOOP;
END $$
"""
# 0023's function, for a downgrade.
_SIZE_FUNCTION = """
CREATE FUNCTION edgeloom_vector_index(size int) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
  SET maintenance_work_mem = '256MB'
  AS $$
BEGIN
  IF (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
      WHERE attrelid = 'record_vectors'::regclass AND attname = 'embedding') <> 'vector' THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock(7113004);
  EXECUTE format(
    'CREATE INDEX IF NOT EXISTS %I ON record_vectors USING hnsw '
    '((embedding::vector(%s)) vector_cosine_ops) WHERE dims = %s',
    'ix_record_vectors_hnsw_' || size, size, size);
END $$
"""


def upgrade() -> None:
    op.execute(_DROP.format(pattern="'ix\\_record\\_vectors\\_hnsw\\_%'"))
    op.execute("DROP FUNCTION edgeloom_vector_index(int)")
    op.execute(_INDEX_FUNCTION)


def downgrade() -> None:
    op.execute(_DROP.format(pattern="'ix\\_record\\_vectors\\_%'"))
    op.execute("DROP FUNCTION edgeloom_vector_index(text, int)")
    op.execute(_SIZE_FUNCTION)
