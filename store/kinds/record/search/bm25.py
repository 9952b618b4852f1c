"""The text list's score: BM25 over the query's terms a record holds (NATURAL), or
PostgreSQL's `ts_rank_cd` (STRICT), as SQL over a candidate and its lane's plan."""

from __future__ import annotations

from store.kinds.record.search.terms import Syntax
from store.reads.statements import Params

# BM25's constants, as Lucene and most engines keep them (Robertson and Zaragoza, "The
# Probabilistic Relevance Framework", 2009): K1 is how fast a repeated word saturates
# (1.2: a second occurrence adds about a third of the first), B how much a record's length
# discounts it (0.75: mostly, not wholly, so long records are not shut out).
K1 = 1.2
B = 0.75


def score_sql(p: Params, syntax: Syntax) -> str:
    """SQL: one row, the candidate `r`'s score by its lane's plan `l`, and the query's
    words it holds (`matched`, in the query's order).

    NATURAL: BM25, the sum over the terms the record holds of idf * tf * (K1 + 1) /
    (tf + K1 * (1 - B + B * length / average length)), tf the term's occurrences in the
    record and length its distinct lexemes; a quoted phrase it holds adds a term of its
    own (tf 1, the weight of its rarest word). STRICT: `ts_rank_cd` (cover density)."""
    # Only the query's lexemes, in a tsvector of their own: `setweight` marks them A in
    # one pass over the record's, `ts_filter` keeps them, with their positions.
    held = """(SELECT array_position(l.lexemes, u.lexeme) AS i,
                coalesce(cardinality(u.positions), 1) AS tf
              FROM unnest(ts_filter(setweight(r.words, 'A', l.lexemes), '{a}')) u) t"""
    matched = "coalesce(array_agg(l.words[t.i] ORDER BY t.i), '{}')"
    if syntax is Syntax.STRICT:
        return f"SELECT ts_rank_cd(r.words, l.query) AS score, {matched} AS matched FROM {held}"
    k1, b = K1, B
    norm = f"({k1} * (1 - {b} + {b} * length(r.words) / {p('average_length', 'float8')}))"
    phrases = f"""(SELECT coalesce(sum(l.phrase_idfs[j] * {k1 + 1} / (1 + {norm})), 0)
              FROM generate_subscripts(l.phrases, 1) j WHERE r.words @@ l.phrases[j])"""
    return f"""SELECT (coalesce(sum(l.idfs[t.i] * t.tf * {k1 + 1} / (t.tf + {norm})), 0)
                + {phrases})::float8 AS score, {matched} AS matched
            FROM {held}"""
