"""The vector list: the nearest record versions to the caller's vector, each lane's
walked in its own HNSW index, or, when the planner says `match` keeps few records
(`planner.EXACT_SCAN_MAX`), the members' vectors compared exactly."""

from __future__ import annotations

from store.kinds.record.queries import members_sql
from store.kinds.record.search.arguments import SearchShape
from store.reads.statements import Params
from store.reads.visibility import RULE

# The vector list: the nearest this many (what a vector search pages through, and what
# is fused with the text list).
VECTOR_DEPTH = 100


def vector_hits_sql(p: Params, shape: SearchShape, name: str) -> str:
    """SQL: the CTE `name`, the vector list: the nearest VECTOR_DEPTH readable record
    versions of the vector's size, each with its score (1 - cosine distance) and rank.

    Each lane's nearest are walked in that lane's own index (`edgeloom_vector_index`:
    one per lane and size), a branch a lane, and the branches' nearest merged: a graph
    holding another lane's vectors could be captured by a dense cluster of them (the
    same text written a thousand times), which the walk cannot leave, so that what a
    caller finds would depend on what others hold."""
    n = shape.vector
    query = f"{p('vector', 'real[]')}::vector({n})"
    at = p("as_of", "timestamptz") if shape.as_of else None
    filters = f"w.dims = {n} AND {RULE.held('w', at)} AND {RULE.unexpired('w.record_id', at)}"
    if shape.source_types:
        filters += f" AND w.source_type = ANY({p('source_types', 'text[]')})"
    # Spelled as the index's expression, so that the planner walks the index.
    walked = f"(w.embedding::vector({n}) <=> {query})"
    columns = "w.record_id AS id, w.from_version, w.recorded_from AS since"
    members, exact = "", ""
    if shape.properties:
        members = members_sql(p, shape.properties, shape.mode, shape.as_of)
        # Decided before the statement (`planner.plan_search`).
        exact = p("exact_vectors", "boolean")

    def walk(lane: str) -> str:
        # The lane is a parameter the planner sees (a custom plan), so that it proves the
        # lane's partial index; a generic plan proves none and compares every vector of
        # the lane exactly, as does a lane whose index the next start makes.
        where = f"{RULE.in_lane('w', lane)} AND {filters}"
        if shape.properties:
            # The one of the two runs the planner chose runs (a one-time filter). Asked of
            # each record the walk reaches (OFFSET 0 keeps it a per-row check,
            # which the planner would otherwise join, sorting every member by distance).
            where += f""" AND NOT {exact} AND EXISTS (
                SELECT 1 FROM ({members}) m WHERE m.record_id = w.record_id OFFSET 0)"""
        return f"""(SELECT {columns}, {walked} AS distance FROM record_vectors w
              WHERE {where} ORDER BY {walked} LIMIT {VECTOR_DEPTH})"""

    found = " UNION ALL ".join(walk(p(f"vector_lane_{i}")) for i in range(shape.vector_lanes))
    if shape.properties:
        found += f"""
            UNION ALL
            (SELECT {columns}, (w.embedding <=> {query}) AS distance
              FROM ({members}) m JOIN record_vectors w ON w.record_id = m.record_id
                AND {RULE.lane("w", p("vector_lanes", "text[]"))} AND {filters}
              WHERE {exact}
              ORDER BY 4 LIMIT {VECTOR_DEPTH})"""
    # The walk's relaxed order is put right by the exact distances it returns. A distance
    # outside [0, 2] is NaN (pgvector's float32 sums of a vector past the lengths a write
    # takes, one stored before they were checked): no score, so no hit.
    return f"""{name} AS (
        SELECT f.id, f.from_version, f.since, NULL::regconfig AS config, NULL::tsquery AS query,
               NULL::text[] AS matched, NULL::bigint AS text_rank,
               (1 - f.distance)::float8 AS score,
               row_number() OVER (ORDER BY (1 - f.distance)::float8 DESC, f.since DESC, f.id)
                 AS vector_rank
        FROM (SELECT * FROM ({found}) a WHERE a.distance BETWEEN 0 AND 2
              ORDER BY a.distance, a.since DESC, a.id LIMIT {VECTOR_DEPTH}) f)"""
