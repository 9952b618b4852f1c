"""Lanes enforced by PostgreSQL too: row-level security under the guard's predicate.

Every table that holds a lane's rows gets row-level security, forced (so its owner is
held to it too, and crosses only by a policy naming it). A row is visible when its lane
is one of `edgeloom.read_lanes` and may be written when it is one of
`edgeloom.write_lanes`: comma-separated settings the gateway sets per transaction
(`set_config(..., true)`, `store.reads.lane_floor`). With no setting nothing is visible
and nothing can be written, so a statement that lost the gateway's lane predicate, or a
transaction that skipped the setting, reads an empty memory instead of another lane's.

Each setting is read once a statement (the `(SELECT ...)` makes it an InitPlan, not a
call a row), and compared with `=` on text, which is leakproof: the policy changes no
plan the gateway's own `lane = ANY($n)` chose.

Who crosses: `edgeloom_crossing` (made here when the owner may make roles), which the
runtime role may `SET ROLE` to for the gateway's own work over every lane (folding the
counts, the feed's poller, the expiry sweep; docs/security.md names each), and the
owner that runs this migration (migrations, `verify`, export and import, and
`edgeloom_erase`, which runs as the owner).

A typed edge is visible when both its lanes are readable (`to_lane` too), as the
gateway's rule says.

`ix_records_retired` holds the lane too: an edge's ends are looked up among the retired
records' ids by an index-only scan, and the policy needs the row's lane.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

CROSSING_ROLE = "edgeloom_crossing"

# Every table with a `lane` column, as of this migration.
LANE_TABLES = (
    "records",
    "edge_properties",
    "audit_events",
    "corrections",
    "edges",
    "record_tags",
    "record_words",
    "record_vectors",
    "search_languages",
    "label_counts",
    "label_deltas",
    "record_counts",
    "record_deltas",
    "member_counts",
    "member_deltas",
    "word_counts",
    "word_deltas",
)

_READ = "(SELECT string_to_array(current_setting('edgeloom.read_lanes', true), ','))::text[]"
_WRITE = "(SELECT string_to_array(current_setting('edgeloom.write_lanes', true), ','))::text[]"

# An event without a lane (a policy's) concerns every reader, as the gateway's rule says.
_USING = {
    "audit_events": f"lane IS NULL OR lane = ANY({_READ})",
    "edges": f"lane = ANY({_READ}) AND to_lane = ANY({_READ})",
}
_CHECK = {"audit_events": f"lane IS NULL OR lane = ANY({_WRITE})"}

# Made if missing, as the runtime role is (store.operations.roles); an owner who may not
# make roles has neither, serves as itself, and crosses by its own policy.
_CREATE_CROSSING = f"""
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{CROSSING_ROLE}') THEN
    CREATE ROLE {CROSSING_ROLE} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
  END IF;
EXCEPTION
  WHEN duplicate_object OR unique_violation THEN NULL;
  WHEN insufficient_privilege THEN
    RAISE NOTICE 'no privilege to create role {CROSSING_ROLE}';
END $$;
"""

_CROSSING_POLICY = """
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN
    EXECUTE 'CREATE POLICY crossing ON {table} TO {role} USING (true) WITH CHECK (true)';
  END IF;
END $$;
"""


def _retired_index(include: list[str]) -> None:
    op.drop_index("ix_records_retired", table_name="records")
    op.create_index(
        "ix_records_retired",
        "records",
        ["id"],
        postgresql_include=include,
        postgresql_where=sa.text("retired_at IS NOT NULL"),
    )


def upgrade() -> None:
    _retired_index(["lane"])
    op.execute(_CREATE_CROSSING)
    for table in LANE_TABLES:
        using = _USING.get(table, f"lane = ANY({_READ})")
        check = _CHECK.get(table, f"lane = ANY({_WRITE})")
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY lanes ON {table} USING ({using}) WITH CHECK ({check})")
        op.execute(f"CREATE POLICY owner ON {table} TO CURRENT_USER USING (true) WITH CHECK (true)")
        op.execute(_CROSSING_POLICY.format(role=CROSSING_ROLE, table=table))


def downgrade() -> None:
    for table in LANE_TABLES:
        op.execute(f"DROP POLICY IF EXISTS crossing ON {table}")
        op.execute(f"DROP POLICY owner ON {table}")
        op.execute(f"DROP POLICY lanes ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    _retired_index([])
