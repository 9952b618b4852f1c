"""Search statistics kept per lane: `word_counts` and `word_deltas`.

How many current records of a lane hold each lexeme, and (lexeme '') how many current
records the lane's words hold and how many lexemes together: what a search ranks by
(inverse document frequency, length normalisation) and plans by, read for the caller's
lanes alone. Filled here from the current words rows; from now on every write appends
deltas and the fold adds them up (store.kinds.record.word_counts).

The default language of a lane that declares none becomes `stemmed_english` (English
stemmed, its stop words kept); a lane with words keeps the language it has.

A record whose metadata names the format of its content (intake's JSON of a note) is
not searched by that content (`edgeloom_search_text`): a note is one hit, by its parts.

`edgeloom_search_share`, which estimated a query's share of the rows from the column's
statistics over every lane, goes: the plan reads these counts instead.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from policies.properties import METADATA_PREFIX

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

# English stemmed, its stop words kept: "went" and "go" stay apart as in `english`, but
# "renewals" meets "renewal" and a question's "who", "he" or "did" still count, weighed
# by how many records hold them (PostgreSQL's own snowball stemmer; no contrib needed).
STEMMED_ENGLISH = (
    "CREATE TEXT SEARCH DICTIONARY stemmed_english_stem (TEMPLATE = snowball, Language = english)",
    "CREATE TEXT SEARCH CONFIGURATION stemmed_english (COPY = english)",
    "ALTER TEXT SEARCH CONFIGURATION stemmed_english ALTER MAPPING FOR asciiword, asciihword, "
    "hword_asciipart, word, hword, hword_part WITH stemmed_english_stem",
)

# A lane with words and no language of its own keeps `simple`, the default it was indexed
# in; a lane without a row is indexed in `stemmed_english` from now on.
PIN = """
INSERT INTO search_languages (lane, config)
SELECT DISTINCT w.lane, 'simple' FROM record_words w
WHERE NOT EXISTS (SELECT 1 FROM search_languages s WHERE s.lane = w.lane)
"""
CONFIG = """
CREATE OR REPLACE FUNCTION edgeloom_search_config(lane text) RETURNS regconfig
  LANGUAGE sql STABLE PARALLEL SAFE
  AS $$ SELECT coalesce((SELECT config FROM search_languages s WHERE s.lane = $1),
                        '{default}')::regconfig $$
"""

# A record whose metadata names the format of its content (intake's JSON of a file or a
# folder) is not searched by it (store.kinds.record.words.searchable).
TEXT = """
CREATE FUNCTION edgeloom_search_text(state jsonb) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT CASE
    WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(state->'properties') p
                 WHERE p->>0 = '{prefix}format')
    THEN '' ELSE state->>'content' END $$
"""
RETEXT = """
UPDATE record_words w SET words = to_tsvector(edgeloom_search_config(w.lane),
                                              edgeloom_search_text(l.state))
FROM ledger l
WHERE l.kind = 'record' AND l.object_id = w.record_id AND l.version = w.from_version
  AND edgeloom_search_text(l.state) IS DISTINCT FROM l.state->>'content'
"""

FILL = """
INSERT INTO word_counts (lane, lexeme, records, lexemes)
SELECT w.lane, u.lexeme, count(*), 0
FROM record_words w, unnest(tsvector_to_array(w.words)) AS u(lexeme)
WHERE w.recorded_to IS NULL
GROUP BY w.lane, u.lexeme
UNION ALL
SELECT w.lane, '', count(*), sum(length(w.words))
FROM record_words w WHERE w.recorded_to IS NULL GROUP BY w.lane
"""


def upgrade() -> None:
    op.create_table(
        "word_counts",
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("lexeme", sa.Text(collation="C"), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.Column("lexemes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("lane", "lexeme", name="pk_word_counts"),
    )
    op.create_table(
        "word_deltas",
        sa.Column("lane", sa.Text(), nullable=False),
        sa.Column("lexeme", sa.Text(collation="C"), nullable=False),
        sa.Column("records", sa.Integer(), nullable=False),
        sa.Column("lexemes", sa.Integer(), nullable=False),
    )
    op.create_index("ix_word_deltas_lexeme", "word_deltas", ["lane", "lexeme"])
    op.execute(TEXT.format(prefix=METADATA_PREFIX))
    op.execute(RETEXT)
    op.execute(FILL)
    op.execute("DROP FUNCTION IF EXISTS edgeloom_search_share(tsquery)")
    for statement in STEMMED_ENGLISH:
        op.execute(statement)
    op.execute(PIN)
    op.execute(CONFIG.format(default="stemmed_english"))


def downgrade() -> None:
    import importlib

    share = importlib.import_module("store.migrations.versions.0026_search_share")
    op.execute(share.SHARE)
    op.execute(CONFIG.format(default="simple"))
    op.execute("DROP TEXT SEARCH CONFIGURATION stemmed_english")
    op.execute("DROP TEXT SEARCH DICTIONARY stemmed_english_stem")
    op.drop_table("word_deltas")
    op.drop_table("word_counts")
    op.execute("DROP FUNCTION edgeloom_search_text(jsonb)")
