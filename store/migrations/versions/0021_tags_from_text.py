"""Tags from a person's text only: `record_tags` rebuilt from current records by the rule
as it now reads (no `#` inside a link, the tags a frontmatter lists, none of content the
engine wrote), so the index equals what the write path and `verify` compute.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from store.kinds.record.tags import FORMAT, tags_of
from store.reads.visibility import RULE

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_WRITTEN_BY_ENGINE = RULE.metadata_prefix + FORMAT


def upgrade() -> None:
    bind = op.get_bind()
    bind.execute(sa.text("DELETE FROM record_tags"))
    insert = sa.text(
        "INSERT INTO record_tags (record_id, lane, tags) VALUES (:record_id, :lane, :tags)"
    )
    # In pages of ids, so a large memory is never held at once.
    page = sa.text(
        "SELECT id, lane, content, properties FROM records "
        "WHERE id > :after AND strpos(content, '#') + strpos(content, '---') > 0 "
        "ORDER BY id LIMIT 2000"
    )
    after = ""
    while True:
        rows = bind.execute(page, {"after": after}).all()
        if not rows:
            break
        after = rows[-1].id
        batch = []
        for r in rows:
            pairs = r.properties if isinstance(r.properties, list) else json.loads(r.properties)
            if any(label == _WRITTEN_BY_ENGINE for label, _ in pairs):
                continue
            found = tags_of(r.content)
            if found:
                batch.append({"record_id": r.id, "lane": r.lane, "tags": list(found)})
        if batch:
            bind.execute(insert, batch)


def downgrade() -> None:
    """The rows stay as this rule wrote them (the earlier rule only counted more)."""
