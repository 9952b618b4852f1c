"""The text list: each lane's candidates read as its plan says (`planner`), narrowed by
the visibility rule and the search's filters, counted up to the budget and scored
(`bm25`)."""

from __future__ import annotations

from store.kinds.record.queries import members_sql
from store.kinds.record.search import planner
from store.kinds.record.search.arguments import SearchShape
from store.kinds.record.search.bm25 import score_sql
from store.reads.statements import Params
from store.reads.visibility import RULE


def text_hits_sql(p: Params, shape: SearchShape, name: str) -> str:
    """SQL: the CTE `name`, the readable candidates of the text that are ranked, each
    with its score and the query's words it holds, and before it `{name}_count`, the
    candidates counted up to COUNT_BUDGET + 1.

    Each lane's candidates are the matches of its plan's query (`planner`), read
    from the GIN index or, where its plan says so, by walking the lane's rows newest
    first until COUNT_BUDGET + 1 match (the match asked of each row as a function, which
    no index serves: the GIN index would read every match to sort them by time). Each
    lane's index read is its own subquery (OFFSET 0), so the index is probed with that
    lane's query rather than every row joined to the plan's lanes. The COUNT_BUDGET
    newest candidates are ranked: within the budget, every one.

    The rule on the words row (`RULE.in_lane`, `RULE.held`) is the whole visibility
    rule, with no read of `records` per match: a row holds its record's lane (which no
    version changes) and the interval in which the record was live with that content,
    closed by a retirement in the retiring write's own transaction. So a row held now is
    a record not retired now, and a row held at T one not retired at T."""
    at = p("as_of", "timestamptz") if shape.as_of else None
    where = ""
    if shape.source_types:
        where += f" AND w.source_type = ANY({p('source_types', 'text[]')})"
    if shape.properties:
        members = members_sql(p, shape.properties, shape.mode, shape.as_of)
        where += f" AND w.record_id IN (SELECT m.record_id FROM ({members}) m)"
    held = f"{RULE.held('w', at)} AND {RULE.unexpired('w.record_id', at)}"
    budget = planner.COUNT_BUDGET
    columns = "w.record_id AS id, w.from_version, w.recorded_from AS since, w.lane, w.words"
    newest = "ORDER BY f.since DESC, f.id DESC"
    lane = RULE.in_lane("w", "l.lane")
    # The same rule, spelled so that no btree serves it: the index read is the GIN
    # index's, which an instant in the past would otherwise trade for the lane's btree.
    by_lane = "(w.lane || '') = l.lane"
    return f"""{name}_lanes AS (
        SELECT l.lane, l.config::regconfig AS config, l.query::tsquery AS query,
               l.marks::tsquery AS marks, l.walk, l.lexemes, l.words, l.idfs,
               l.phrases::tsquery[] AS phrases, l.phrase_idfs
        FROM jsonb_to_recordset({p("text_plan", "text")}::jsonb) AS l(lane text, config text,
          query text, marks text, walk boolean, lexemes text[], words text[], idfs float8[],
          phrases text[], phrase_idfs float8[])),
      {name}_matches AS (
        SELECT m.* FROM {name}_lanes l CROSS JOIN LATERAL (
          SELECT {columns} FROM record_words w
          WHERE l.walk AND {lane} AND {held}{where} AND ts_match_vq(w.words, l.query)
          ORDER BY w.recorded_from DESC, w.record_id DESC LIMIT {budget + 1}) m
        UNION ALL
        SELECT m.* FROM {name}_lanes l CROSS JOIN LATERAL (
          SELECT {columns} FROM record_words w
          WHERE NOT l.walk AND {by_lane} AND w.words @@ l.query AND {held}{where}
          OFFSET 0) m),
      {name}_count AS (
        SELECT count(*) AS n FROM (SELECT 1 FROM {name}_matches LIMIT {budget + 1}) c),
      {name}_ranked AS (SELECT * FROM {name}_matches f {newest} LIMIT {budget}),
      {name} AS (
        SELECT r.id, r.from_version, r.since, l.config, l.marks AS query, s.score, s.matched,
               NULL::bigint AS vector_rank
        FROM {name}_ranked r JOIN {name}_lanes l ON l.lane = r.lane
        CROSS JOIN LATERAL ({score_sql(p, shape.syntax)}) s)"""
