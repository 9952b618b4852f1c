"""`edgeloom_search_share(query)`: the share of the words rows a text query matches, as
the column's statistics foretell it, for search to choose how it reads its matches.

Asked in the search's statement, `pg_stats` (a view over four catalogs) cost more to
plan than the rest of a rare word's search cost to run; a PL/pgSQL function plans its
statements once a session.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

# A lexeme in a tsquery's text is quoted, a quote in it doubled; `!` before it negates
# it, `:*` after it makes it a prefix. A word not among the column's most common (or no
# statistics yet), a query with `or`, a negated phrase or no word not negated: 0. The
# tables are in `public`, as the upkeep that analyzes them has them (store.ledger.upkeep).
SHARE = r"""
CREATE FUNCTION edgeloom_search_share(query tsquery) RETURNS float8
  LANGUAGE plpgsql STABLE PARALLEL SAFE AS $fn$
DECLARE
  listed text;
  elems text[];
  freqs real[];
  share float8 := 1;
  words int := 0;
  m text[];
  word text;
  f float8;
BEGIN
  IF strpos(query::text, '|') > 0 OR query::text ~ '!\s*[(]' THEN
    RETURN 0;
  END IF;
  SELECT s.most_common_elems::text, s.most_common_elem_freqs INTO listed, freqs
  FROM pg_stats s
  WHERE s.schemaname = 'public' AND s.tablename = 'record_words' AND s.attname = 'words';
  IF listed IS NULL THEN
    RETURN 0;
  END IF;
  FOR m IN SELECT regexp_matches(query::text, $re$(!?)'((?:[^']|'')*)'(:[*])?$re$, 'g') LOOP
    CONTINUE WHEN m[1] = '!';
    word := replace(m[2], '''''', '''');
    -- A word in no common word's text is not common, nor a prefix of one: the product
    -- is 0, known without reading the list as an array (most searches' words are rare).
    IF strpos(listed, word) = 0 THEN
      RETURN 0;
    END IF;
    elems := coalesce(elems, listed::text[]);
    IF m[3] IS NULL THEN
      f := coalesce(freqs[array_position(elems, word)], 0);
    ELSE
      SELECT coalesce(sum(u.f), 0) INTO f FROM unnest(elems, freqs) u(e, f)
      WHERE starts_with(u.e, word);
    END IF;
    share := share * least(f, 1);
    words := words + 1;
  END LOOP;
  RETURN CASE WHEN words = 0 THEN 0 ELSE share END;
END
$fn$
"""


def upgrade() -> None:
    op.execute(SHARE)


def downgrade() -> None:
    op.execute("DROP FUNCTION edgeloom_search_share(tsquery)")
