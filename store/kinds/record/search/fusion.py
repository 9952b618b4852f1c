"""Text and vector lists fused: one score for a hit of either list or both, each list's
score placed on its own distribution (the whole of how the two lists meet is here)."""

from __future__ import annotations

# Text and vector lists together: the weight of the text's score in the fused one (the
# vector's, the rest), each placed on its list's distribution (`fused_sql`). Weights 0.3
# to 0.7, scores placed between their list's least and best, and reciprocal rank fusion
# (k = 10 to 60) were measured on FriendsQA's dev split: this gained the most over the
# better list alone at recall@10 scoped and pooled at once (+0.026, +0.036), where each
# reciprocal rank fusion that gained more in one fell behind in the other (docs/search.md).
TEXT_WEIGHT = 0.6


def fused_hits_sql(text: str, vector: str, name: str) -> str:
    """SQL: the CTE `name`, every hit of the CTEs `text` and `vector` (each with its
    score) once, with its fused score (`fused_sql`) and its place in the text list."""
    # A hit in one list only has no term for the other.
    return f"""{name} AS (
        SELECT coalesce(t.id, v.id) AS id, coalesce(t.from_version, v.from_version) AS from_version,
               coalesce(t.since, v.since) AS since, t.config, t.query, t.matched, t.text_rank,
               v.vector_rank,
               ({fused_sql()})::float8 AS score
        FROM (SELECT x.*, row_number() OVER (ORDER BY x.score DESC, x.since DESC, x.id)
                AS text_rank, avg(x.score) OVER () AS mean, stddev_pop(x.score) OVER () AS sd
              FROM {text} x) t
        FULL JOIN (SELECT y.*, avg(y.score) OVER () AS mean, stddev_pop(y.score) OVER () AS sd
                   FROM {vector} y) v ON v.id = t.id)"""


def fused_sql() -> str:
    """SQL: a hit's fused score, TEXT_WEIGHT of its text score plus the rest of its
    similarity, each placed on its list's distribution (distribution-based score fusion:
    a score's distance above the list's mean less three standard deviations, over six
    standard deviations; a list of one score, or of equal ones, places them at 1; a list
    it is not in adds 0): both lists on one scale whatever their spread, so a clear
    winner of one list stays ahead of a middling hit of both (bench/README.md,
    "Relevance")."""

    def placed(x: str) -> str:
        return (
            f"coalesce(({x}.score - {x}.mean + 3 * {x}.sd) / nullif(6 * {x}.sd, 0), "
            f"({x}.score IS NOT NULL)::int)"
        )

    return f"{TEXT_WEIGHT} * {placed('t')} + {1 - TEXT_WEIGHT} * {placed('v')}"
