"""The search's one statement: its hits (the text list, the vector list, or both fused)
ranked best first, a page of them after the cursor, and their count. `search_sql` and
`hits_sql` are its builders: the resolver runs the statement (`find`), and the compiled
path builds the same SQL inside its response (`compiled_json`)."""

from __future__ import annotations

import functools

from store.kinds.record.search import planner
from store.kinds.record.search.arguments import SearchShape
from store.kinds.record.search.fusion import fused_hits_sql
from store.kinds.record.search.highlights import highlights_sql, version_content_sql
from store.kinds.record.search.terms import Syntax
from store.kinds.record.search.text_hits import text_hits_sql
from store.kinds.record.search.vector_hits import vector_hits_sql
from store.reads.statements import Params, Statement

# Best first; among equal scores, the version written last first, then by id: an order
# no record of another lane or another world's ids can change.
_ORDER = "k.score DESC, k.since DESC, k.id"


def search_sql(p: Params, shape: SearchShape) -> tuple[str, str]:
    """SQL: the page (rows id, from_version, score, score_key, since, text_rank,
    vector_rank, highlights, config, query, matched, place; at most limit+1 of them,
    best first) and the
    statement counting the hits (with text: its matches, ranked or not) up to
    COUNT_BUDGET + 1, over the CTEs ending in `hits` that `hits_sql` defines."""
    text_only = shape.text and not shape.vector
    keyed, before = "", "0"
    if shape.after:
        # A strict text score is a real; any other a double.
        strict = text_only and shape.syntax is Syntax.STRICT
        score = p("after_score", "real" if strict else "float8")
        at, after_id = p("after_at", "timestamptz"), p("after_id")
        keyed = (
            f"WHERE k.score < {score} OR (k.score = {score} AND (k.since < {at} "
            f"OR (k.since = {at} AND k.id > {after_id})))"
        )
        # The place of this page's first hit in the text list: one more than the hits
        # before it.
        before = (
            f"(SELECT count(*) FROM hits b WHERE b.score > {score} "
            f"OR (b.score = {score} AND (b.since > {at} "
            f"OR (b.since = {at} AND b.id <= {after_id}))))"
        )
    content = version_content_sql("k")
    marks = "'[]'::json"
    if shape.text and shape.highlights:
        marks = highlights_sql(content, "k.config", "k.query")
    if shape.fused:
        marks = f"CASE WHEN k.text_rank IS NULL THEN '[]'::json ELSE {marks} END"
    text_rank = f"{before} + row_number() OVER (ORDER BY {_ORDER})" if text_only else "k.text_rank"
    # The best `limit` hits by a top-N sort (no ranking of every hit); the score as a
    # double (as the API writes it), and as the type it is for cursors.
    page = f"""SELECT k.id, k.from_version, k.score::float8 AS score, k.score::text AS score_key,
          k.since, {text_rank} AS text_rank, k.vector_rank, {marks} AS highlights,
          k.config, k.query, coalesce(k.matched, '{{}}') AS matched,
          row_number() OVER (ORDER BY {_ORDER}) AS place
        FROM (SELECT * FROM hits k {keyed} ORDER BY {_ORDER} LIMIT {p("limit")}) k
        ORDER BY place"""
    counted = f"SELECT count(*) FROM (SELECT 1 FROM hits LIMIT {planner.COUNT_BUDGET + 1}) c"
    if text_only:
        counted = "SELECT n FROM hits_count"
    elif shape.fused:
        # Past the budget the text list is the newest matches, fewer than the count.
        counted = f"SELECT greatest((SELECT n FROM text_hits_count), ({counted}))"
    return page, counted


def hits_sql(p: Params, shape: SearchShape) -> str:
    """SQL: the CTEs ending in `hits`, every readable hit with its score (id,
    from_version, since, score, config, query, matched, text_rank, vector_rank)."""
    if not shape.vector:
        return text_hits_sql(p, shape, "hits")
    if not shape.text:
        return vector_hits_sql(p, shape, "hits")
    text, vector = text_hits_sql(p, shape, "text_hits"), vector_hits_sql(p, shape, "vector_hits")
    return f"{text}, {vector}, {fused_hits_sql(p, shape, 'text_hits', 'vector_hits', 'hits')}"


@functools.cache
def search_statement(shape: SearchShape, count: bool) -> Statement:
    p = Params()
    hits = hits_sql(p, shape)
    page, total = search_sql(p, shape)
    counted = f"({total})" if count else "NULL::bigint"
    return p.statement(
        f"""WITH {hits} SELECT {counted} AS total, q.* FROM (SELECT 1) c
        LEFT JOIN LATERAL ({page}) q ON true"""
    )
