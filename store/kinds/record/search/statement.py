"""Search: records by their words, by the caller's vector, or both, narrowed like any
other read, in one statement.

A text query is what an agent writes, a question or keywords (`planner.Syntax.
NATURAL`): every word the lane's language keeps counts and none is required, and the
candidates are ranked by BM25 over the statistics of the caller's lanes alone
(`search_plan`, `word_counts`); `Syntax.STRICT` is PostgreSQL's websearch syntax, every
word required, ranked by `ts_rank_cd`. A planner decides, before the statement and from
values it reads on the same snapshot, which records are candidates and how each lane's
are read; the statement takes its decisions as values.

The candidates are record versions whose words (`store.kinds.record.words`) match the
plan's query, each lane's in that lane's language: the current rows, or at `as_of` the
rows held then. They are narrowed by the visibility rule (readable lane, not retired now
or then), by `sourceTypes`, and by `match`: the same membership set a gather reads
(`queries.members_sql`). Ties of score go to the newest version first and then by id (an
order no other lane can change); pages follow that key; the count stops at COUNT_BUDGET.
Past it, the COUNT_BUDGET newest candidates are the ones ranked: a word in most records
is not a search; `match` and rarer words narrow it.

Each hit says which of the query's words it holds, and its highlights are the words
`ts_headline` marks in the content of the version read, with their offsets in code
points into that content, computed for the hits of the page alone and only when asked.

By vector (`store.kinds.record.vectors`): the nearest VECTOR_DEPTH record versions by
cosine distance among the lanes whose embedding has the vector's size (one model:
`policies.guard.vector_lanes`), under the same filters, scored 1 - distance. The walk is
each lane's own HNSW index (migration 0028: no other lane's vectors are in its graph) with
iterative scans (the database's default, migration 0023), so a filtered walk goes on until
it has found that many; but when `match` keeps
few records (at most EXACT_SCAN_MAX by the maintained member counts) their vectors are
compared exactly instead, which no walk could beat. Text and vector together are fused
on one scale (`fused_sql`), each list computed under the same filters.

`search_sql` is the one builder of the statement: the resolver runs it here, and the
compiled path builds the same SQL inside its response.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from policies.guard import vector_lanes
from policies.model import Embedding
from store.errors import InvalidInputError
from store.kinds.record import counts, embedding
from store.kinds.record.queries import bind_properties, gather_properties, members_sql
from store.kinds.record.search import planner
from store.kinds.record.search.planner import COUNT_BUDGET as COUNT_BUDGET
from store.kinds.record.search.planner import Plan
from store.kinds.record.search.planner import Syntax as Syntax
from store.reads.pages import Page, encode_cursor, key_cursor, page_size
from store.reads.shape import GatherMode
from store.reads.snapshot import Reader
from store.reads.statements import Params, Statement
from store.reads.visibility import RULE

MAX_QUERY_CHARS = 1000
# The vector list: the nearest this many (what a vector search pages through, and what
# is fused with the text list).
VECTOR_DEPTH = 100
# A `match` keeping at most this many records (by the maintained counts) has its
# vectors compared exactly rather than found by walking the index.
EXACT_SCAN_MAX = 5_000
# Text and vector lists together: the weight of the text's score in the fused one (the
# vector's, the rest), each placed on its list's distribution (`fused_sql`). Weights 0.3
# to 0.7, scores placed between their list's least and best, and reciprocal rank fusion
# (k = 10 to 60) were measured on FriendsQA's dev split: this gained the most over the
# better list alone at recall@10 scoped and pooled at once (+0.026, +0.036), where each
# reciprocal rank fusion that gained more in one fell behind in the other (docs/search.md).
TEXT_WEIGHT = 0.6
# The largest float32: a cursor's score beyond it is none a search gave.
FLOAT32_MAX = 3.4028234663852886e38
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
    syntax: Syntax = Syntax.NATURAL
    # Whether the page's rows carry their highlights (the compiled path builds them
    # where the field is asked instead).
    highlights: bool = True
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
    matched: tuple[str, ...] = ()


def version_content_sql(hit: str) -> str:
    """SQL: the content of the version a hit (its alias, with id and from_version) read."""
    return (
        "(SELECT e.state->>'content' FROM ledger e WHERE e.kind = 'record' "
        f"AND e.object_id = {hit}.id AND e.version = {hit}.from_version)"
    )


def highlights_sql(content: str, config: str, query: str) -> str:
    """SQL: the JSON list of the words of `content` that `query` matches, each with its
    offsets (code points, end exclusive) into `content`, at most MAX_HIGHLIGHTS.

    One pass marks the words and one splits at the marks; each of the first
    MAX_HIGHLIGHTS + 1 pieces gives a word, placed by the lengths of the pieces before it
    less their markers, so the cost is the content's length once, whatever the number of
    occurrences."""
    marked = (
        f"ts_headline({config}, translate({content}, E'{_START}{_STOP}', E'\\x20\\x20'), "
        f"{query}, E'StartSel={_START}, StopSel={_STOP}, HighlightAll=true')"
    )
    # The n-th piece (n > 1) starts with the (n-1)-th marked word and holds one stop
    # marker; it starts after the pieces before it, less the n - 2 stop markers there.
    return f"""(SELECT coalesce(json_agg(json_build_object('text', t.w, 'start', t.s,
          'end', t.s + length(t.w)) ORDER BY t.n), '[]'::json)
        FROM (SELECT x.n, split_part(x.piece, E'{_STOP}', 1) AS w,
                     coalesce(sum(length(x.piece)) OVER (ORDER BY x.n ROWS BETWEEN
                       UNBOUNDED PRECEDING AND 1 PRECEDING), 0) - (x.n - 2) AS s
              FROM (SELECT y.piece, y.n FROM (SELECT {marked} AS h OFFSET 0) hl,
                      string_to_table(hl.h, E'{_START}') WITH ORDINALITY AS y(piece, n)
                    LIMIT {MAX_HIGHLIGHTS + 1}) x) t
        WHERE t.n > 1)"""


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
    # A hit in one list only has no term for the other.
    return f"""{text_hits_sql(p, shape, "text_hits")}, {vector_hits_sql(p, shape, "vector_hits")},
      hits AS (
        SELECT coalesce(t.id, v.id) AS id, coalesce(t.from_version, v.from_version) AS from_version,
               coalesce(t.since, v.since) AS since, t.config, t.query, t.matched, t.text_rank,
               v.vector_rank,
               ({fused_sql()})::float8 AS score
        FROM (SELECT x.*, row_number() OVER (ORDER BY x.score DESC, x.since DESC, x.id)
                AS text_rank, avg(x.score) OVER () AS mean, stddev_pop(x.score) OVER () AS sd
              FROM text_hits x) t
        FULL JOIN (SELECT y.*, avg(y.score) OVER () AS mean, stddev_pop(y.score) OVER () AS sd
                   FROM vector_hits y) v ON v.id = t.id)"""


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
               NULL::text[] AS matched, NULL::bigint AS text_rank,
               (1 - f.distance)::float8 AS score,
               row_number() OVER (ORDER BY (1 - f.distance)::float8 DESC, f.since DESC, f.id)
                 AS vector_rank
        FROM (SELECT * FROM ({found}) a WHERE a.distance BETWEEN 0 AND 2
              ORDER BY a.distance, a.since DESC, a.id LIMIT {VECTOR_DEPTH}) f)"""


def _estimate(p: Params, shape: SearchShape) -> str:
    """SQL: about how many records of the vector lanes `match` keeps."""
    return members_estimate_sql(p, shape.properties, shape.mode, "vector_lanes")


def members_estimate_sql(p: Params, properties: int, mode: GatherMode, lanes: str) -> str:
    """SQL: about how many records of the lanes `lanes` (a parameter) `match` keeps, from
    the counts kept now (all of them for UNION, the rarest property's for INTERSECT)."""
    each = [
        f"({counts.member_count(p(f'label_{n}'), p(f'value_{n}'), p(lanes, 'text[]'))})"
        for n in range(properties)
    ]
    if mode is GatherMode.INTERSECT:
        return f"least({', '.join(each)})"
    return " + ".join(each)


@functools.cache
def _members_estimate(properties: int, mode: GatherMode) -> Statement:
    p = Params()
    return p.statement(f"SELECT ({members_estimate_sql(p, properties, mode, 'lanes')})::bigint")


async def _members(db: Reader, values: Mapping[str, Any], prefix: str) -> int | None:
    """About how many records a bound search's `match` keeps (None: no match)."""
    properties = values[prefix + "narrowed"]
    if not properties:
        return None
    statement = _members_estimate(properties, values[prefix + "mode"])
    own = {k.removeprefix(prefix): v for k, v in values.items() if k.startswith(prefix)}
    found: int = await db.fetchval(statement.text, *statement.args(own))
    return found


def text_hits_sql(p: Params, shape: SearchShape, name: str) -> str:
    """SQL: the CTE `name`, the readable candidates of the text that are ranked, each
    with its score and the query's words it holds, and before it `{name}_count`, the
    candidates counted up to COUNT_BUDGET + 1.

    Each lane's candidates are the matches of its plan's query (`search_plan`), read
    from the GIN index or, where its plan says so, by walking the lane's rows newest
    first until COUNT_BUDGET + 1 match (the match asked of each row as a function, which
    no index serves: the GIN index would read every match to sort them by time). Each
    lane's index read is its own subquery (OFFSET 0), so the index is probed with that
    lane's query rather than every row joined to the plan's lanes. Within
    the budget every candidate is ranked; past it, the COUNT_BUDGET newest.

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
      {name}_ranked AS (
        SELECT * FROM {name}_matches WHERE (SELECT n FROM {name}_count) <= {budget}
        UNION ALL
        SELECT * FROM (SELECT * FROM {name}_matches f {newest} LIMIT {budget}) f
        WHERE (SELECT n FROM {name}_count) > {budget}),
      {name} AS (
        SELECT r.id, r.from_version, r.since, l.config, l.marks AS query, s.score, s.matched,
               NULL::bigint AS vector_rank
        FROM {name}_ranked r JOIN {name}_lanes l ON l.lane = r.lane
        CROSS JOIN LATERAL ({score_sql(p, shape.syntax)}) s)"""


def score_sql(p: Params, syntax: planner.Syntax) -> str:
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
    if syntax is planner.Syntax.STRICT:
        return f"SELECT ts_rank_cd(r.words, l.query) AS score, {matched} AS matched FROM {held}"
    k1, b = planner.K1, planner.B
    norm = f"({k1} * (1 - {b} + {b} * length(r.words) / {p('average_length', 'float8')}))"
    phrases = f"""(SELECT coalesce(sum(l.phrase_idfs[j] * {k1 + 1} / (1 + {norm})), 0)
              FROM generate_subscripts(l.phrases, 1) j WHERE r.words @@ l.phrases[j])"""
    return f"""SELECT (coalesce(sum(l.idfs[t.i] * t.tf * {k1 + 1} / (t.tf + {norm})), 0)
                + {phrases})::float8 AS score, {matched} AS matched
            FROM {held}"""


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
        # No search scores past float32 (a strict text score is one).
        if not math.isfinite(score) or abs(score) > FLOAT32_MAX or since.tzinfo is None:
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
    syntax: Syntax = Syntax.NATURAL


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
        values[prefix + "text"], values[prefix + "syntax"] = words, args.syntax
        values[prefix + "narrowed"], values[prefix + "mode"] = len(props), args.mode
        values[prefix + "prefix"] = args.syntax is Syntax.STRICT and prefix_last(words)
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
        syntax=args.syntax,
        vector_lanes=0 if vector is None else len(vector[1]),
    )


async def plan_text(db: Reader, values: dict[str, Any], prefix: str) -> Plan:
    """The plan of a bound search's text (`bind`), its values put in `values` (what the
    statement takes, and how the query was read: terms, dropped, hint)."""
    syntax = values[prefix + "syntax"]
    plan = await planner.plan(
        db,
        values[prefix + "lanes"],
        values[prefix + "text"],
        syntax,
        values[prefix + "prefix"],
        await _members(db, values, prefix),
        values[prefix + "as_of"] is not None,
    )
    values.update(plan.values(prefix))
    values[prefix + "text_complete"] = plan.complete
    values[prefix + "terms"], values[prefix + "dropped"] = list(plan.terms), list(plan.dropped)
    values[prefix + "hint"] = planner.hint(plan, syntax)
    return plan


@dataclass(frozen=True)
class Hits(Page[Hit]):
    """A page of hits, whether its total is exact (false: a lower bound), how the query
    was read (its terms, and the words dropped), and what to try when it found nothing."""

    total_exact: bool = True
    terms: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    hint: str | None = None


async def search(
    db: Reader, args: SearchArgs, first: int | None, count: bool = True, highlights: bool = True
) -> Hits:
    """The readable records whose words match `args.text` and/or nearest `args.vector`,
    best first (see the module); `highlights`: whether the hits carry theirs."""
    size = page_size(first)
    values: dict[str, Any] = {"limit": size + 1}
    shape = bind(values, "", args)
    if shape is None:
        return Hits([], 0 if count else None, False, None)
    plan = None
    if shape.text:
        plan = await plan_text(db, values, "")
    if not highlights:
        shape = replace(shape, highlights=False)
    statement = _statement(shape, count)
    rows = await db.fetch(statement.text, *statement.args(values))
    total = rows[0]["total"] if rows and count else None
    exact = total is None or (total <= planner.COUNT_BUDGET and (plan is None or plan.complete))
    if total is not None:
        total = min(total, planner.COUNT_BUDGET)
    found = [row for row in rows if row["id"] is not None]
    items = [_hit(row) for row in found[:size]]
    last = found[len(items) - 1] if items else None
    end = None
    if last is not None:
        end = encode_cursor([last["score_key"], last["since"].isoformat(), last["id"]])
    hint = None
    if not found and args.after is None:
        hint = planner.hint(plan, args.syntax) if plan else NO_VECTOR_HIT
    terms, dropped = (plan.terms, plan.dropped) if plan else ((), ())
    return Hits(items, total, len(found) > size, end, exact, terms, dropped, hint)


# What an empty search by vector alone suggests.
NO_VECTOR_HIT = (
    "no record you can read has a vector of this size within the filters given: check the "
    "lanes' embedding (policy) and widen match, lanes or asOf"
)


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
        matched=tuple(row["matched"]),
    )


def _rank(value: Any) -> int | None:
    return None if value is None else int(value)
