"""Token lifecycle: an expiry, the token a rotation made, and when each was last used.

`expires_at` refuses a token from that instant on (`token create --expires-in`, and the
end of a rotated token's grace); `rotated_to` names the token `token rotate` made in its
place. `token_uses` holds each token's last use, at most once a minute, in a table of
its own: the gateway's role writes it and may still only read `tokens`.

Revision ID: 0013
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("tokens", sa.Column("expires_at", TZ, nullable=True))
    op.add_column("tokens", sa.Column("rotated_to", sa.Text(), nullable=True))
    op.create_table(
        "token_uses",
        sa.Column("token_id", sa.Text(), sa.ForeignKey("tokens.id"), primary_key=True),
        sa.Column("last_used_at", TZ, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("token_uses")
    op.drop_column("tokens", "rotated_to")
    op.drop_column("tokens", "expires_at")
