"""Search: records by their words, by the caller's vector, or both, narrowed like any
other read, in one statement.

A text query is what an agent writes, a question or keywords (`terms.Syntax.NATURAL`):
every word the lane's language keeps counts and none is required, and the candidates are
ranked by BM25 (`bm25`) over the statistics of the caller's lanes alone (`planner`,
`store.kinds.record.word_counts`); `Syntax.STRICT` is PostgreSQL's websearch syntax, every
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
it has found that many; but when `match` keeps few records (at most the planner's
EXACT_SCAN_MAX by the maintained member counts) their vectors are compared exactly
instead, which no walk could beat. Text and vector together are fused
on one scale (`fusion`), each list computed under the same filters.

Its modules, in the order a search runs: `arguments` (checked and bound, and the shape
they give the statement), `terms` (the query's words read by each lane's language, and
their statistics), `planner` (which records are candidates and how each lane's are read),
`text_hits` and `bm25` (the text list and its score), `vector_hits` (the vector list),
`fusion` (the two on one scale), `statement` (the one statement: the hits ranked, a page
of them and their count), `highlights`, `hints` (what to try when nothing was found),
and `find` (the resolver's run of it) or `compiled_json` (the compiled path's, which
builds the same SQL inside its response).
"""
