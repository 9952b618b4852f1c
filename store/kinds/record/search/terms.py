"""How a text query is read into terms: its words as each language the caller's lanes
use reads them (`ts_debug`: kept as lexemes, or dropped as stop words), its quoted
phrases, its strict (`websearch_to_tsquery`) form, and the statistics of its lexemes in
the caller's lanes (`word_counts`), in one statement on the request's snapshot.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from store.kinds.record import word_counts
from store.kinds.record.words import CONFIG
from store.reads.snapshot import Reader

# A lexeme in a tsquery's text: quoted, a quote in it doubled.
LEXEME = re.compile(r"'((?:[^']|'')*)'")


class Syntax(enum.Enum):
    NATURAL = "NATURAL"
    STRICT = "STRICT"


@dataclass
class Words:
    """What one language makes of the query: its kept words (lexeme -> the query's word),
    the words it drops, its phrases and its strict query."""

    config: str
    lanes: list[str]
    kept: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)
    strict: str = ""


# The query's words in each language the lanes use, and their statistics in the lanes:
# one statement, so planning costs one round trip. A phrase's lexemes are among the
# query's (it is part of the text, read by the same parser). The lexemes are one value
# for the statement (a sub-select, an InitPlan): under the lanes' row-level security only
# leakproof comparisons reach an index ahead of the policy (migration 0032), and
# array_append in the comparison is not one.
_READ_WORDS = f"""
WITH l AS (SELECT x.lane, {CONFIG}(x.lane) AS config FROM unnest($1::text[]) AS x(lane)),
c AS (SELECT config, array_agg(lane ORDER BY lane) AS lanes FROM l GROUP BY config),
d AS (
  SELECT c.config, d.token, d.lexemes, d.n
  FROM c CROSS JOIN LATERAL ts_debug(c.config, $2) WITH ORDINALITY
    AS d(alias, description, token, dictionaries, dictionary, lexemes, n)
  WHERE d.lexemes IS NOT NULL
),
w AS (
  SELECT c.config::text AS config, c.lanes,
    (SELECT coalesce(json_agg(json_build_array(d.token, d.lexemes) ORDER BY d.n), '[]')
       FROM d WHERE d.config = c.config) AS tokens,
    (SELECT coalesce(json_agg(phraseto_tsquery(c.config, p.p)::text ORDER BY p.o), '[]')
       FROM unnest($3::text[]) WITH ORDINALITY AS p(p, o)) AS phrases,
    websearch_to_tsquery(c.config, $2)::text AS strict
  FROM c
),
counted AS ({
    word_counts.read_sql(
        f"(SELECT array_append(ARRAY(SELECT DISTINCT unnest(d.lexemes) FROM d), "
        f"'{word_counts.TOTAL}'))::text[]"
    )
})
SELECT (SELECT coalesce(json_agg(w ORDER BY w.config), '[]') FROM w)::text AS languages,
  (SELECT coalesce(json_agg(json_build_array(lane, lexeme, records, lexemes)), '[]')
     FROM counted)::text AS counts
"""


def phrases_of(text: str) -> list[str]:
    """The quoted phrases of a query (an unclosed quote runs to the end)."""
    parts = text.split('"')
    return [p.strip() for p in parts[1::2] if p.strip()]


async def read_words(
    db: Reader, lanes: Sequence[str], text: str
) -> tuple[list[Words], dict[str, word_counts.LaneCounts]]:
    """What each language of `lanes` makes of `text`, and the statistics of its words in
    `lanes`."""
    row = await db.fetchrow(_READ_WORDS, list(lanes), text, phrases_of(text))
    assert row is not None
    found = []
    for language in json.loads(row["languages"]):
        words = Words(language["config"], list(language["lanes"]), strict=language["strict"])
        for token, lexemes in language["tokens"]:
            if not lexemes:
                words.dropped.append(token.lower())
            for lexeme in lexemes:
                words.kept.setdefault(lexeme, token.lower())
        words.phrases = [p for p in language["phrases"] if "<" in p]
        found.append(words)
    return found, word_counts.collect(lanes, json.loads(row["counts"]))
