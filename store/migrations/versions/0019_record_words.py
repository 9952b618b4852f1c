"""Search: `record_words`, the words of each record version, and `search_languages`.

The intervals written here are the projection's (store.kinds.record.words), cut from
each record's ledger entries, so the rows are those the write path and `verify` agree
on. `edgeloom_search_config(lane)` is the language a lane's words are indexed in.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

from store.kinds.record.model import Record
from store.kinds.record.projection import project_record
from store.kinds.record.words import Interval, intervals
from store.ledger.entry import Entry

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

CONFIG = """
CREATE FUNCTION edgeloom_search_config(lane text) RETURNS regconfig
  LANGUAGE sql STABLE PARALLEL SAFE
  AS $$ SELECT coalesce((SELECT config FROM search_languages s WHERE s.lane = $1),
                        'simple')::regconfig $$
"""

_ENTRIES = sa.text(
    "SELECT kind, object_id, version, event, actor, at, policy_version, state, prev_hash, hash "
    "FROM ledger WHERE kind = 'record' AND object_id IN ("
    "  SELECT DISTINCT object_id FROM ledger WHERE kind = 'record' AND object_id > :after "
    "  ORDER BY object_id LIMIT 1000) "
    "ORDER BY object_id, version"
)
_INSERT = sa.text(
    "INSERT INTO record_words (record_id, from_version, lane, source_type, recorded_from, "
    "recorded_to, words) SELECT :record_id, :from_version, :lane, :source_type, "
    ":recorded_from, :recorded_to, to_tsvector('simple', l.state->>'content') FROM ledger l "
    "WHERE l.kind = 'record' AND l.object_id = :record_id AND l.version = :from_version"
)


def upgrade() -> None:
    op.create_table(
        "search_languages",
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("config", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("lane", name="pk_search_languages"),
    )
    op.execute(CONFIG)
    op.create_table(
        "record_words",
        sa.Column("record_id", sa.Text(collation="C"), nullable=False),
        sa.Column("from_version", sa.Integer(), nullable=False),
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("source_type", sa.Text(), nullable=False),
        sa.Column("recorded_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("words", TSVECTOR(), nullable=False),
        sa.PrimaryKeyConstraint("record_id", "from_version", name="pk_record_words"),
    )
    _backfill()
    op.create_index(
        "ix_record_words_current",
        "record_words",
        ["words"],
        postgresql_using="gin",
        postgresql_where=sa.text("recorded_to IS NULL"),
    )
    op.create_index("ix_record_words_words", "record_words", ["words"], postgresql_using="gin")


def _backfill() -> None:
    bind = op.get_bind()
    after = ""
    while True:
        rows = bind.execute(_ENTRIES, {"after": after}).mappings().all()
        if not rows:
            break
        after = rows[-1]["object_id"]
        found: list[Interval] = []
        versions: list[Record] = []
        for n, row in enumerate(rows):
            entry = Entry.from_row(row)
            before = versions[-1] if versions else None
            versions.append(project_record(before, entry).record)
            if n + 1 == len(rows) or rows[n + 1]["object_id"] != entry.object_id:
                found.extend(intervals(versions))
                versions = []
        if found:
            bind.execute(_INSERT, [i.__dict__ for i in found])


def downgrade() -> None:
    op.drop_table("record_words")
    op.execute("DROP FUNCTION edgeloom_search_config(text)")
    op.drop_table("search_languages")
