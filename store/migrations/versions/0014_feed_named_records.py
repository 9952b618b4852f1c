"""An index of the records each audit event's payload names, for the feed's `recordIds`.

A subscriber following given records wants the events about them and those naming them
in their payloads (the other end of a connection, the records an adjustment links, and
any kind to come whose payload names the records it joins). Its replay from a cursor
finds the first by `ix_audit_events_record_id_seq` and the second here: a GIN index over
the record ids a payload names, only for the events whose payload names one, so the
other events cost nothing more to write.

Revision ID: 0014
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0011"
branch_labels = None
depends_on = None

_PATH = "'$.*[*]?(@ starts with \"sr_\")'::jsonpath"


def upgrade() -> None:
    op.execute(
        f"CREATE INDEX ix_audit_events_named ON audit_events "
        f"USING gin (jsonb_path_query_array(payload, {_PATH})) "
        f"WHERE jsonb_path_exists(payload, {_PATH})"
    )


def downgrade() -> None:
    op.drop_index("ix_audit_events_named", table_name="audit_events")
