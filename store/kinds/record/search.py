"""Search: records by their words, by the caller's vector, or both, narrowed like any
other read, in one statement.

The candidates are the record versions whose words (`store.kinds.record.words`) match
the query, each lane's in that lane's language: the current rows from the partial GIN
index, or at `as_of` the rows held then. They are narrowed by the visibility rule
(readable lane, not retired now or then), by `sourceTypes`, and by `match`: the same
membership set a gather reads (`queries.members_sql`). Hits are ranked by
`ts_rank_cd` (cover density: how many of the query's words a record holds and how close
together), ties by the newest version first and then by id (an order no other lane can
change), paged by that key, and counted up to COUNT_BUDGET.

A search's cost is bounded by one budget, COUNT_BUDGET, not by how many records hold its
words: one with at most that many matches counts and ranks them all; one with more (its
count a lower bound) ranks its COUNT_BUDGET newest matches (by the version's transaction
time, then by id, newest first). A word in most records is not a search: which of its
records is "best" says little, and agents value recent memory; `match` and more words
narrow such a search to what is meant, and within the budget every hit is ranked again.
Matches are read from the GIN index, or, for a query most rows match, by walking each
lane's rows newest first (a btree by time), which finds the budget's worth in about
the budget over the query's share of the rows, where the index would read the entry of
every match: chosen once per statement by the column's statistics (`plan_sql`).

The query syntax is PostgreSQL's `websearch_to_tsquery`: words (all of them), `"a
phrase"`, `or`, `-word` (not); the last word, when it is a bare word the caller may still
be typing, also matches as a prefix. Nothing a caller types is a syntax error. Each hit's
highlights are the words `ts_headline` marks in the content of the version read, with
their offsets in code points into that content.

By vector (`store.kinds.record.vectors`): the nearest VECTOR_DEPTH record versions by
cosine distance among the lanes whose embedding has the vector's size (one model:
`policies.guard.vector_lanes`), under the same filters, scored 1 - distance. The walk is
each lane's own HNSW index (migration 0028: no other lane's vectors are in its graph) with
iterative scans (the database's default, migration 0023), so a filtered walk goes on until
it has found that many; but when `match` keeps
few records (at most EXACT_SCAN_MAX by the maintained member counts) their vectors are
compared exactly instead, which no walk could beat. Text and vector together are fused by
reciprocal rank: score = 1/(60 + textRank) + 1/(60 + vectorRank), a term for each list
the hit is in, each list computed under the same filters.

`totalCount` counts the hits up to COUNT_BUDGET (with text, its matches, ranked or not);
past it, it is that budget and marked as a lower bound. A vector list holds at most
VECTOR_DEPTH hits by definition.

`search_sql` is the one builder of the statement: the resolver runs it here, and the
compiled path builds the same SQL inside its response.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policies.guard import vector_lanes
from policies.model import Embedding
from store.errors import InvalidInputError
from store.kinds.record import counts, embedding
from store.kinds.record.queries import bind_properties, gather_properties, members_sql
from store.kinds.record.words import CONFIG
from store.reads.pages import Page, encode_cursor, key_cursor, page_size
from store.reads.shape import GatherMode
from store.reads.snapshot import Reader
from store.reads.statements import Params, Statement
from store.reads.visibility import RULE

MAX_QUERY_CHARS = 1000
# The vector list: the nearest this many (what a vector search pages through, and what
# reciprocal rank fusion fuses with the text list).
VECTOR_DEPTH = 100
# A `match` keeping at most this many records (by the maintained counts) has its
# vectors compared exactly rather than found by walking the index.
EXACT_SCAN_MAX = 5_000
# totalCount is exact up to this many hits; past it, a lower bound, and the text hits
# ranked are this many, the newest matches.
COUNT_BUDGET = 1_000
# A row fetched through the GIN index costs about this many rows walked newest first
# (a bitmap heap scan visits a page a match; a walk reads each page's rows in turn):
# EXPLAIN ANALYZE at 1,000,000 records, 2-3 us against 0.25 us (bench/README.md).
WALK_COST = 10
# Reciprocal rank fusion's constant: a hit's score is the sum of 1/(RRF_K + rank).
RRF_K = 60
# Highlights per hit: a long record's every occurrence of a common word is not a snippet.
MAX_HIGHLIGHTS = 50
# Best first; among equal scores, the version written last first, then by id: an order
# no record of another lane or another world's ids can change.
_ORDER = "k.score DESC, k.since DESC, k.id"
# The markers ts_headline puts around a matched word; the content read has none.
_START, _STOP = "\\x01", "\\x02"


@dataclass(frozen=True)
class SearchShape:
    """What varies the statement's text: how many properties `match` has (0: none), how
    they combine, and which optional arguments are set."""

    properties: int = 0
    mode: GatherMode = GatherMode.INTERSECT
    as_of: bool = False
    source_types: bool = False
    after: bool = False
    text: bool = True
    vector: int = 0  # the search vector's size (0: none)
    vector_lanes: int = 0  # how many lanes it is compared in (a walk of each one's index)

    @property
    def fused(self) -> bool:
        return self.text and self.vector > 0


@dataclass(frozen=True)
class Highlight:
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    text_rank: int | None
    vector_rank: int | None
    highlights: tuple[Highlight, ...]


def highlights_sql(content: str, config: str, query: str) -> str:
    """SQL: the JSON list of the words of `content` that `query` matches, each with its
    offsets (code points, end exclusive) into `content`, at most MAX_HIGHLIGHTS."""
    marked = (
        f"ts_headline({config}, translate({content}, E'{_START}{_STOP}', E'\\x20\\x20'), {query}, "
        f"E'StartSel={_START}, StopSel={_STOP}, HighlightAll=true')"
    )
    # The n-th marked word starts after the 2(n-1) markers before it.
    return f"""(SELECT coalesce(json_agg(json_build_object('text', t.w, 'start', t.s,
          'end', t.s + length(t.w)) ORDER BY t.n), '[]'::json)
        FROM (SELECT n, regexp_substr(hl.h, E'{_START}([^{_STOP}]*){_STOP}', 1, n, '', 1) AS w,
                     regexp_instr(hl.h, E'{_START}', 1, n) - 1 - 2 * (n - 1) AS s
              FROM (SELECT {marked} AS h OFFSET 0) hl
              CROSS JOIN generate_series(1, least(regexp_count(hl.h, E'{_START}'),
                                                  {MAX_HIGHLIGHTS})) n) t)"""


def search_sql(p: Params, shape: SearchShape) -> tuple[str, str]:
    """SQL: the page (rows id, from_version, score, score_key, since, text_rank,
    vector_rank, highlights, place; at most limit+1 of them, best first) and the
    statement counting the hits (with text: its matches, ranked or not) up to
    COUNT_BUDGET + 1, over the CTEs ending in `hits` that `hits_sql` defines."""
    text_only = shape.text and not shape.vector
    keyed, before = "", "0"
    if shape.after:
        # A text score is a real; a vector or fused one a double.
        score = p("after_score", "real" if text_only else "float8")
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
    content = (
        "(SELECT e.state->>'content' FROM ledger e WHERE e.kind = 'record' "
        "AND e.object_id = k.id AND e.version = k.from_version)"
    )
    marks = "'[]'::json"
    if shape.text:
        marks = highlights_sql(content, "k.config", "k.query")
    if shape.fused:
        marks = f"CASE WHEN k.text_rank IS NULL THEN '[]'::json ELSE {marks} END"
    text_rank = f"{before} + row_number() OVER (ORDER BY {_ORDER})" if text_only else "k.text_rank"
    # The best `limit` hits by a top-N sort (no ranking of every hit); the score as a
    # double (as the API writes it), and as the type it is for cursors.
    page = f"""SELECT k.id, k.from_version, k.score::float8 AS score, k.score::text AS score_key,
          k.since, {text_rank} AS text_rank, k.vector_rank, {marks} AS highlights,
          row_number() OVER (ORDER BY {_ORDER}) AS place
        FROM (SELECT * FROM hits k {keyed} ORDER BY {_ORDER} LIMIT {p("limit")}) k
        ORDER BY place"""
    counted = f"SELECT count(*) FROM (SELECT 1 FROM hits LIMIT {COUNT_BUDGET + 1}) c"
    if text_only:
        counted = "SELECT n FROM hits_count"
    elif shape.fused:
        # Past the budget the text list is the newest matches, fewer than the count.
        counted = f"SELECT greatest((SELECT n FROM text_hits_count), ({counted}))"
    return page, counted


def hits_sql(p: Params, shape: SearchShape) -> str:
    """SQL: the CTEs ending in `hits`, every readable hit with its score (id,
    from_version, since, score, config, query, text_rank, vector_rank)."""
    if not shape.vector:
        return text_hits_sql(p, shape, "hits")
    if not shape.text:
        return vector_hits_sql(p, shape, "hits")
    # A hit in one list only has no term for the other.
    return f"""{text_hits_sql(p, shape, "text_hits")}, {vector_hits_sql(p, shape, "vector_hits")},
      hits AS (
        SELECT coalesce(t.id, v.id) AS id, coalesce(t.from_version, v.from_version) AS from_version,
               coalesce(t.since, v.since) AS since, t.config, t.query, t.text_rank, v.vector_rank,
               (coalesce(1.0 / ({RRF_K} + t.text_rank), 0)
                + coalesce(1.0 / ({RRF_K} + v.vector_rank), 0))::float8 AS score
        FROM (SELECT x.*, row_number() OVER (ORDER BY x.score DESC, x.since DESC, x.id)
                AS text_rank FROM text_hits x) t
        FULL JOIN vector_hits v ON v.id = t.id)"""


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
    filters = f"w.dims = {n} AND {RULE.held('w', at)}"
    if shape.source_types:
        filters += f" AND w.source_type = ANY({p('source_types', 'text[]')})"
    # Spelled as the index's expression, so that the planner walks the index.
    walked = f"(w.embedding::vector({n}) <=> {query})"
    columns = "w.record_id AS id, w.from_version, w.recorded_from AS since"
    members, small = "", ""
    if shape.properties:
        members = members_sql(p, shape.properties, shape.mode, shape.as_of)
        small = f"({_estimate(p, shape)}) <= {EXACT_SCAN_MAX}"

    def walk(lane: str) -> str:
        # The lane is a parameter the planner sees (a custom plan), so that it proves the
        # lane's partial index; a generic plan proves none and compares every vector of
        # the lane exactly, as does a lane whose index the next start makes.
        where = f"{RULE.in_lane('w', lane)} AND {filters}"
        if shape.properties:
            # Which of the two runs is decided once, before either (a one-time filter).
            # Asked of each record the walk reaches (OFFSET 0 keeps it a per-row check,
            # which the planner would otherwise join, sorting every member by distance).
            where += f""" AND NOT {small} AND EXISTS (
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
              WHERE {small}
              ORDER BY 4 LIMIT {VECTOR_DEPTH})"""
    # The walk's relaxed order is put right by the exact distances it returns. A distance
    # outside [0, 2] is NaN (pgvector's float32 sums of a vector past the lengths a write
    # takes, one stored before they were checked): no score, so no hit.
    return f"""{name} AS (
        SELECT f.id, f.from_version, f.since, NULL::regconfig AS config, NULL::tsquery AS query,
               NULL::bigint AS text_rank, (1 - f.distance)::float8 AS score,
               row_number() OVER (ORDER BY (1 - f.distance)::float8 DESC, f.since DESC, f.id)
                 AS vector_rank
        FROM (SELECT * FROM ({found}) a WHERE a.distance BETWEEN 0 AND 2
              ORDER BY a.distance, a.since DESC, a.id LIMIT {VECTOR_DEPTH}) f)"""


def _estimate(p: Params, shape: SearchShape) -> str:
    """SQL: about how many records of the vector lanes `match` keeps, from the counts
    kept now (all of them for UNION, the rarest property's for INTERSECT)."""
    lanes = p("vector_lanes", "text[]")
    each = [
        f"({counts.member_count(p(f'label_{n}'), p(f'value_{n}'), lanes)})"
        for n in range(shape.properties)
    ]
    if shape.mode is GatherMode.INTERSECT:
        return f"least({', '.join(each)})"
    return " + ".join(each)


def text_hits_sql(p: Params, shape: SearchShape, name: str) -> str:
    """SQL: the CTE `name`, the readable matches of the text that are ranked, each with
    its score, and before it the CTE `{name}_count`, the matches counted up to
    COUNT_BUDGET + 1.

    Within the budget every match is ranked; past it, the COUNT_BUDGET newest (see the
    module). Matches are read from the GIN index, or by a walk of each lane's rows
    newest first asking each whether it matches, which finds COUNT_BUDGET + 1 of a
    query most rows match in about COUNT_BUDGET / its share of the rows, however large
    the memory, where the index reads every match's entry. `plan_sql` chooses, once,
    before either runs.

    The rule on the words row (`RULE.in_lane`, `RULE.held`) is the whole visibility
    rule, with no read of `records` per match: a row holds its record's lane (which no
    version changes) and the interval in which the record was live with that content,
    closed by a retirement in the retiring write's own transaction. So a row held now is
    a record not retired now, and a row held at T one not retired at T."""
    lanes = p("lanes", "text[]")
    at = p("as_of", "timestamptz") if shape.as_of else None
    text = p("text")
    query = f"websearch_to_tsquery(c.config, {text})"
    # The tsquery's text ends with its last lexeme's quote when its last element is a
    # word: that word then matches as a prefix.
    prefixed = (
        f"CASE WHEN {p('prefix', 'boolean')} "
        f"THEN regexp_replace({query}::text, '''$', ''':*')::tsquery ELSE {query} END"
    )
    where = ""
    if shape.source_types:
        where += f" AND w.source_type = ANY({p('source_types', 'text[]')})"
    if shape.properties:
        members = members_sql(p, shape.properties, shape.mode, shape.as_of)
        where += f" AND w.record_id IN (SELECT m.record_id FROM ({members}) m)"
    held = RULE.held("w", at)
    budget = COUNT_BUDGET
    # The row and what ranks it: the score is computed for the ranked rows alone.
    columns = (
        "w.record_id AS id, w.from_version, w.recorded_from AS since, w.words, l.config, l.query"
    )
    newest = "ORDER BY f.since DESC, f.id DESC"
    # Each lane's query is parsed once, not once a matching row. The walk reads each
    # lane's rows newest first (a backward scan of ix_record_words_newest), at most the
    # plan's rows of them (none planned: all), the match asked of each as a function,
    # which no index serves: the GIN index, planned for a query it cannot see, would read
    # every match to sort them by time. `_count` decides once whether the walk counted
    # the matches (the index's count is not read when it did, nor the walk when none is
    # planned); each branch of `_ranked` runs or not by a one-time filter on that: the
    # matches are read one way, or by a walk that gave up and then the index.
    planned = f"(SELECT walk FROM {name}_plan)"
    walked = f"(SELECT walked FROM {name}_count)"
    over = f"(SELECT n FROM {name}_count) > {budget}"
    walk_ranks = f"({walked} OR ({over} AND (SELECT rank_walk FROM {name}_plan) AND {planned} = 0))"
    return f"""{name}_lanes AS (
        SELECT c.lane, c.config, {prefixed} AS query
        FROM (SELECT x.lane, {CONFIG}(x.lane) AS config
              FROM (SELECT DISTINCT unnest({lanes}) AS lane) x) c),
      {name}_plan AS ({plan_sql(f"{name}_lanes", narrowed=shape.properties > 0)}),
      {name}_walk AS (
        SELECT f.* FROM (
          SELECT n.* FROM {name}_lanes l CROSS JOIN LATERAL (
            SELECT {columns} FROM (
              SELECT w.* FROM record_words w
              WHERE {RULE.in_lane("w", "l.lane")} AND {held}{where}
              ORDER BY w.recorded_from DESC, w.record_id DESC
              LIMIT (SELECT nullif(p.walk, 0) FROM {name}_plan p)) w
            WHERE ts_match_vq(w.words, l.query) LIMIT {budget + 1}) n) f
        {newest} LIMIT {budget + 1}),
      {name}_all AS (
        SELECT {columns}
        FROM {name}_lanes l
        JOIN record_words w ON {RULE.in_lane("w", "l.lane")} AND w.words @@ l.query AND {held}
        WHERE true{where}),
      {name}_count AS (
        SELECT d.walked, CASE WHEN d.walked THEN {budget + 1} ELSE (
                 SELECT count(*) FROM (SELECT 1 FROM {name}_all LIMIT {budget + 1}) c) END AS n
        FROM (SELECT {planned} > 0 AND (SELECT count(*) FROM {name}_walk) > {budget}
                AS walked OFFSET 0) d),
      {name}_ranked AS (
        SELECT * FROM (SELECT * FROM {name}_walk f {newest} LIMIT {budget}) f WHERE {walk_ranks}
        UNION ALL
        SELECT * FROM {name}_all WHERE NOT {over}
        UNION ALL
        SELECT * FROM (SELECT * FROM {name}_all f {newest} LIMIT {budget}) f
        WHERE {over} AND NOT {walk_ranks}),
      {name} AS (
        SELECT r.id, r.from_version, r.since, r.config, r.query,
               ts_rank_cd(r.words, r.query) AS score, NULL::bigint AS vector_rank
        FROM {name}_ranked r)"""


def plan_sql(lanes: str, narrowed: bool) -> str:
    """SQL: one row, how the matches are read: `walk`, how many rows of each lane may be
    walked newest first to count them (0: count from the index), and `rank_walk`,
    whether a search the index counts past the budget finds its newest matches by
    walking (else from every match the index gives, as does a walk that gave up: the
    matches are fewer among the newest rows than the statistics said).

    The choice is by cost, a row fetched through the index counting as WALK_COST rows
    walked, and by the share of the rows the query matches, estimated from the column's
    statistics (`pg_stats` of `record_words.words`, kept by ANALYZE: the upkeep's after
    bulk writes, and autovacuum's) as the product of its words' frequencies (a prefix:
    of the common words it begins; a word not among the most common, or a query with
    `or` or a negated phrase: 0). A walk finds the budget's matches in about budget /
    share rows; the index reads every match's entry and fetches the rows it counts (at
    most the budget) or ranks (every match). The counting walk may read as many rows as
    the index would have cost, so a share overestimated costs at most that again; a
    `match` (`narrowed`) is read from the index, which joins it to the members, so its
    cost follows the smaller of the two sets."""
    if narrowed:
        return "SELECT 0::bigint AS walk, false AS rank_walk"
    share = f"(SELECT coalesce(max(edgeloom_search_share(l.query)), 0) FROM {lanes} l)"
    total = (
        "(SELECT greatest(c.reltuples, 0) FROM pg_class c WHERE c.oid = 'record_words'::regclass)"
    )
    budget, cost = COUNT_BUDGET, WALK_COST
    counted = f"e.share * e.total + {cost} * least(e.share * e.total, {budget + 1})"
    return f"""SELECT CASE WHEN e.share > 0 AND {budget + 1} / e.share < {counted}
                           THEN ceil({counted})::bigint ELSE 0 END AS walk,
                      e.share > 0 AND {budget} / e.share < {cost} * e.share * e.total
                        AS rank_walk
               FROM (SELECT {share} AS share, {total} AS total OFFSET 0) e"""


@functools.cache
def _statement(shape: SearchShape, count: bool) -> Statement:
    p = Params()
    hits = hits_sql(p, shape)
    page, total = search_sql(p, shape)
    counted = f"({total})" if count else "NULL::bigint"
    return p.statement(
        f"""WITH {hits} SELECT {counted} AS total, q.* FROM (SELECT 1) c
        LEFT JOIN LATERAL ({page}) q ON true"""
    )


def check_text(text: str | None) -> str:
    """The query text, or a refusal naming what is wrong with it."""
    if text is None or not text.strip():
        raise InvalidInputError(
            'text is empty: give the words to search for, e.g. "renewal risk"', allowed="words"
        )
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInputError(
            f"text is {len(text)} characters long; a search takes at most {MAX_QUERY_CHARS}",
            allowed=MAX_QUERY_CHARS,
        )
    if "\x00" in text:
        raise InvalidInputError("text holds a NUL character, which no content holds")
    return text


def prefix_last(text: str) -> bool:
    """Whether the query's last word is a bare word the caller may still be typing (not
    closing a phrase, not negated, not the word `or`)."""
    stripped = text.rstrip()
    if stripped.endswith('"') or stripped.count('"') % 2 == 1:
        return False
    last = stripped.split()[-1]
    return not last.startswith("-") and last.lower() != "or" and last[-1].isalnum()


def search_cursor(after: str | None) -> tuple[float, datetime, str] | None:
    """The (score, since, id) after which a page of hits goes on (None: from the start)."""
    key = key_cursor(after, 3)
    if key is None:
        return None
    try:
        score, since = float(key[0]), datetime.fromisoformat(key[1])
        if not math.isfinite(score) or since.tzinfo is None:
            raise ValueError(key)
    except ValueError as exc:
        raise InvalidInputError(
            f"cursor '{(after or '')[:40]}' is not one this list gave out: a cursor is a "
            "page's endCursor, passed back unchanged; omit after for the first page"
        ) from exc
    return score, since, key[2]


@dataclass(frozen=True)
class VectorScope:
    """What a search by vector may use: the embeddings the policy declares, by lane, and
    why this memory cannot search by vector (None: it can)."""

    embeddings: Mapping[str, Embedding] = field(default_factory=dict)
    off: str | None = None


@dataclass(frozen=True)
class SearchArgs:
    """A search's arguments, as the caller gave them (`lanes`: those it may read)."""

    text: str | None
    match: Sequence[str] | None
    mode: GatherMode
    lanes: Sequence[str]
    source_types: Sequence[str] | None
    as_of: datetime | None
    after: str | None
    vector: Sequence[float] | None = None
    scope: VectorScope = field(default_factory=lambda: VectorScope())


def check_vector(args: SearchArgs) -> tuple[bytes, list[str]]:
    """The search vector (as float32 values) and the lanes it is compared in, or a
    refusal naming what is wrong."""
    if args.scope.off is not None:
        raise InvalidInputError(args.scope.off)
    assert args.vector is not None
    packed = embedding.pack(args.vector, "vector")
    return packed, vector_lanes(args.scope.embeddings, args.lanes, embedding.size(packed))


def bind(values: dict[str, Any], prefix: str, args: SearchArgs) -> SearchShape | None:
    """Check a search's arguments (refusing what is wrong, naming it), put the values its
    statement takes in `values` (each name after `prefix`), and say its shape; None when
    `match` leaves nothing to find (only the engine's labels)."""
    if args.text is None and args.vector is None:
        raise InvalidInputError(
            "search needs text, vector or both: the words to find, and/or the vector of "
            "what to find near (of the size the lanes' policy declares)"
        )
    words = None if args.text is None else check_text(args.text)
    vector = None if args.vector is None else check_vector(args)
    props = gather_properties(args.match) if args.match else []
    if args.match and not props:
        return None
    key = search_cursor(args.after)
    values.update(
        {
            prefix + "lanes": list(args.lanes),
            prefix + "as_of": args.as_of,
            prefix + "source_types": list(args.source_types or ()),
        }
    )
    if words is not None:
        values[prefix + "text"], values[prefix + "prefix"] = words, prefix_last(words)
    if vector is not None:
        values[prefix + "vector"] = list(embedding.unpack(vector[0]))
        values[prefix + "vector_lanes"] = vector[1]
        for i, lane in enumerate(vector[1]):
            values[prefix + f"vector_lane_{i}"] = lane
    bind_properties(values, prefix, props)
    if key is not None:
        values[prefix + "after_score"], values[prefix + "after_at"], values[prefix + "after_id"] = (
            key
        )
    given = args.source_types is not None
    return SearchShape(
        len(props),
        args.mode,
        args.as_of is not None,
        given,
        key is not None,
        text=words is not None,
        vector=0 if vector is None else embedding.size(vector[0]),
        vector_lanes=0 if vector is None else len(vector[1]),
    )


@dataclass(frozen=True)
class Hits(Page[Hit]):
    """A page of hits, and whether its total is exact (false: a lower bound)."""

    total_exact: bool = True


async def search(db: Reader, args: SearchArgs, first: int | None, count: bool = True) -> Hits:
    """The readable records whose words match `args.text` and/or nearest `args.vector`,
    best first (see the module)."""
    size = page_size(first)
    values: dict[str, Any] = {"limit": size + 1}
    shape = bind(values, "", args)
    if shape is None:
        return Hits([], 0 if count else None, False, None)
    statement = _statement(shape, count)
    rows = await db.fetch(statement.text, *statement.args(values))
    total = rows[0]["total"] if rows and count else None
    exact = total is None or total <= COUNT_BUDGET
    if total is not None:
        total = min(total, COUNT_BUDGET)
    found = [row for row in rows if row["id"] is not None]
    items = [_hit(row) for row in found[:size]]
    last = found[len(items) - 1] if items else None
    end = None
    if last is not None:
        end = encode_cursor([last["score_key"], last["since"].isoformat(), last["id"]])
    return Hits(items, total, len(found) > size, end, exact)


def _hit(row: Any) -> Hit:
    # A pool's connections decode JSON (store.pool); a plain connection gives its text.
    marks = row["highlights"]
    marks = json.loads(marks) if isinstance(marks, str) else marks or []
    return Hit(
        id=row["id"],
        score=float(row["score"]),
        text_rank=_rank(row["text_rank"]),
        vector_rank=_rank(row["vector_rank"]),
        highlights=tuple(Highlight(m["text"], m["start"], m["end"]) for m in marks),
    )


def _rank(value: Any) -> int | None:
    return None if value is None else int(value)
