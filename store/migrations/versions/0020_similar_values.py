"""Similar values: each counted value's normalised key and its one-deletion neighbours.

`edgeloom_similar_key(value)`: the value in lower case, its accents (combining marks
after NFKD) and its spacing and ASCII punctuation removed, so `ACME, Inc.` and
`acme inc` share one key. `edgeloom_near_keys(label, key)`: the key and every key one
character shorter (for keys of at most 32 characters), each after its label: two values
of a label whose keys are one insertion, deletion, substitution or adjacent swap apart
share an entry, found on the GIN index (no pg_trgm, no fuzzystrmatch: the embedded
server has no contrib). Both are generated columns of `member_counts`, so the fold, import
and this migration fill them alike.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

FUNCTIONS = (
    r"""
CREATE FUNCTION edgeloom_similar_key(value text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT regexp_replace(lower(normalize(value, NFKD)),
                              '[\u0300-\u036f[:space:]!-/:-@[-`{-~]+', '', 'g') $$
""",
    r"""
CREATE FUNCTION edgeloom_near_keys(label text, key text) RETURNS text[]
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT ARRAY(SELECT DISTINCT label || E'\x1f' || x FROM (
           SELECT key AS x
           UNION ALL SELECT overlay(key placing '' from i for 1)
           FROM generate_series(1, CASE WHEN length(key) <= 32 THEN length(key) ELSE 0 END) i
         ) d ORDER BY 1) $$
""",
)


def upgrade() -> None:
    for function in FUNCTIONS:
        op.execute(function)
    op.execute(
        "ALTER TABLE member_counts "
        "ADD COLUMN similar_key text GENERATED ALWAYS AS (edgeloom_similar_key(value)) STORED, "
        "ADD COLUMN near_keys text[] GENERATED ALWAYS AS "
        "(edgeloom_near_keys(label, edgeloom_similar_key(value))) STORED"
    )
    op.create_index(
        "ix_member_counts_near_keys", "member_counts", ["near_keys"], postgresql_using="gin"
    )


def downgrade() -> None:
    op.drop_index("ix_member_counts_near_keys", "member_counts")
    op.execute("ALTER TABLE member_counts DROP COLUMN near_keys, DROP COLUMN similar_key")
    op.execute("DROP FUNCTION edgeloom_near_keys(text, text)")
    op.execute("DROP FUNCTION edgeloom_similar_key(text)")
