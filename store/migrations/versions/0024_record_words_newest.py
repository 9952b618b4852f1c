"""The words rows of each lane by transaction time: a search past its count budget ranks
its newest matches, read newest first from this index (`store.kinds.record.search`),
now and as of an instant alike.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_record_words_newest", "record_words", ["lane", "recorded_from", "record_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_record_words_newest", "record_words")
