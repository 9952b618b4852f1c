"""Text and vector lists fused: one score for a hit of either list or both, each score
over its theoretical range (the whole of how the two lists meet is here)."""

from __future__ import annotations

from store.kinds.record.search.arguments import SearchShape
from store.kinds.record.search.bm25 import K1
from store.kinds.record.search.terms import Syntax
from store.reads.statements import Params
from store.reads.visibility import RULE

# With a vector, the text list's best this many are compared with it too, as the vector
# list's nearest are scored by their words (`fused_sql`): past both lists' best, a hit
# ranks low whatever its similarity (bench.fusion: comparing the 50 best or every text hit
# changed no figure), and each comparison reads a vector.
TEXT_COMPARED = 100
# Text and vector lists together: the weight of the text's score in the fused one (the
# vector's, the rest), each over its theoretical range (`fused_sql`). Measured on
# FriendsQA's dev split (`bench.fusion`), against scores placed on their list's
# distribution, between their list's least and best or over its best, and reciprocal rank
# fusion (k = 10 to 60): every hit scored by both lists gained the most pooled (recall@10
# +0.045 over the better list alone, against +0.036 for the distribution-based fusion
# before it) and about as much scoped (+0.022, where none tried gained over +0.027), and
# weights 0.6 to 0.7 did within 0.004 of each other: 0.65, their middle (docs/search.md).
TEXT_WEIGHT = 0.65


def fused_hits_sql(p: Params, shape: SearchShape, text: str, vector: str, name: str) -> str:
    """SQL: the CTE `name` (after `text_bounds`), every hit of the CTEs `text` and `vector`
    (each with its score) once, with its fused score (`fused_sql`) and its place in the
    text list. `text` is the CTE of `text_hits_sql`, beside its `{text}_lanes`."""
    # STRICT's ts_rank_cd has no bound of its own: its list's best stands for it.
    bound = "max(x.score) OVER ()" if shape.syntax is Syntax.STRICT else "b.bound"
    similarity = (
        f"CASE WHEN t.text_rank <= {TEXT_COMPARED} THEN {similarity_sql(p, shape, 't.id')} END"
    )
    return f"""text_bounds AS (
        SELECT l.config,
               {K1 + 1} * max((SELECT coalesce(sum(i), 0) FROM unnest(l.idfs || l.phrase_idfs) i))
                 AS bound
        FROM {text}_lanes l GROUP BY l.config),
      {name} AS (
        SELECT coalesce(t.id, v.id) AS id, coalesce(t.from_version, v.from_version) AS from_version,
               coalesce(t.since, v.since) AS since, t.config, t.query, t.matched, t.text_rank,
               v.vector_rank,
               ({fused_sql(similarity)})::float8 AS score
        FROM (SELECT x.*, row_number() OVER (ORDER BY x.score DESC, x.since DESC, x.id)
                AS text_rank, {bound} AS bound
              FROM {text} x LEFT JOIN text_bounds b ON b.config = x.config) t
        FULL JOIN {vector} v ON v.id = t.id)"""


def fused_sql(similarity: str) -> str:
    """SQL: a hit's fused score, a convex combination of its two scores, each over its
    theoretical range (Bruch et al., "An Analysis of Fusion Functions for Hybrid
    Retrieval", 2023): TEXT_WEIGHT of its BM25 score over the most a record could score
    for this query (`bound`: each term's idf * (K1 + 1), the limit of a term repeated
    without end), plus the rest of its cosine similarity placed in [0, 1] ((1 + cos) / 2).
    Every hit of the vector list and of the text list's best TEXT_COMPARED has both
    scores: a hit of the vector list alone holds none of the words the text list was read
    by (BM25 0), and one of the text list alone has its `similarity` computed (a record
    with no vector of the size adds 0). So a hit's score is its own (but for the text
    list's hits past its best TEXT_COMPARED, which add no similarity), not placed among
    the others, and a clear winner of one list stays ahead of a middling hit of both
    (bench/README.md, "Relevance")."""
    text = "coalesce(t.score / nullif(t.bound, 0), 0)"
    near = f"coalesce((1 + coalesce(v.score, {similarity})) / 2, 0)"
    return f"{TEXT_WEIGHT} * {text} + {round(1 - TEXT_WEIGHT, 6)} * {near}"


def similarity_sql(p: Params, shape: SearchShape, record: str) -> str:
    """SQL: the cosine similarity of the search's vector to the vector the record
    `record` (an id) held at the instant read, in a lane of the vector's size (NULL: none,
    or no distance: a vector past the lengths a write takes)."""
    n = shape.vector
    at = p("as_of", "timestamptz") if shape.as_of else None
    distance = f"(w.embedding <=> {p('vector', 'real[]')}::vector({n}))"
    return f"""(SELECT 1 - d.distance FROM (SELECT {distance} AS distance FROM record_vectors w
          WHERE w.record_id = {record} AND w.dims = {n}
            AND {RULE.lane("w", p("vector_lanes", "text[]"))} AND {RULE.held("w", at)}
          LIMIT 1) d WHERE d.distance BETWEEN 0 AND 2)"""
