"""Tags as an index over record content: `record_tags`, filled from current records.

The rule that finds a content's tags is the projection's (store.kinds.record.tags),
so the rows written here are those the write path and `verify` agree on.

Revision ID: 0015
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

from store.kinds.record.tags import tags_of

revision = "0015"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "record_tags",
        sa.Column("record_id", sa.Text(collation="C"), nullable=False),
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("tags", ARRAY(sa.Text()), nullable=False),
        sa.PrimaryKeyConstraint("record_id", name="pk_record_tags"),
    )
    op.create_index("ix_record_tags_tags", "record_tags", ["tags"], postgresql_using="gin")
    op.create_index("ix_record_tags_lane", "record_tags", ["lane"])
    bind = op.get_bind()
    insert = sa.text(
        "INSERT INTO record_tags (record_id, lane, tags) VALUES (:record_id, :lane, :tags)"
    )
    # In pages of ids, so a large memory is never held at once.
    page = sa.text(
        "SELECT id, lane, content FROM records WHERE id > :after AND strpos(content, '#') > 0 "
        "ORDER BY id LIMIT 2000"
    )
    after = ""
    while True:
        rows = bind.execute(page, {"after": after}).all()
        if not rows:
            break
        after = rows[-1].id
        batch = [
            {"record_id": r.id, "lane": r.lane, "tags": list(found)}
            for r in rows
            if (found := tags_of(r.content))
        ]
        if batch:
            bind.execute(insert, batch)


def downgrade() -> None:
    op.drop_table("record_tags")
