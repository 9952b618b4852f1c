"""How a text search reads: the query's words as each lane's language reads them, their
statistics in the caller's lanes, and from these which records are candidates, how each
lane's are read and what each word weighs.

A planner runs on the request's snapshot before the search's statement, in one short
read: the words (`ts_debug` in each language the lanes use) and their counts in the
caller's lanes (`word_counts`). Everything it decides is a value the statement takes,
so a search's text is fixed by its shape, and what it decides depends on the lanes the
caller reads and nothing else.

The default syntax (`Syntax.NATURAL`) reads what an agent writes, a question or
keywords: every word the lane's language keeps is a term, none is required, and a
record's score is BM25 (`bm25`) over its terms, weighed by inverse
document frequency in the caller's lanes. Stop words are dropped (and said so); the
English word "or" is a word like any other; a quoted phrase is a term of its own besides
its words. Candidates are the records holding the rarest terms, as many terms as keep
the postings read within COUNT_BUDGET: a record holding only the query's most common
words scores less than one holding a rarer one, and is a candidate when the rarer ones
leave room. When even the rarest term is held by more than COUNT_BUDGET records, the
COUNT_BUDGET newest records holding it are the candidates.

`Syntax.STRICT` is PostgreSQL's `websearch_to_tsquery`: every word required,
`"phrases"`, `or`, `-not`, the last bare word a prefix; ranked by `ts_rank_cd`.

Each lane's candidates are read from the GIN index, or by walking the lane's rows
newest first (a btree by time) when the query's share of its rows makes that cheaper:
a walk finds COUNT_BUDGET matches in about COUNT_BUDGET / share rows, the index reads
every match, a match fetched through it costing about WALK_COST rows walked.

`plan_search`, both paths' one entry, also says whether the vector list compares the
members of `match` exactly: each way of reading is chosen by a value decided here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.kinds.record import word_counts
from store.kinds.record.search.hints import hint
from store.kinds.record.search.narrowing import members_kept
from store.kinds.record.search.terms import LEXEME, Syntax, Words, read_words
from store.reads.snapshot import Reader

# Matches counted, and candidates ranked, at most (see the module).
COUNT_BUDGET = 1_000

# A `match` keeping at most this many records (by the maintained counts) makes every
# record of it holding any term a candidate: scoring them all costs less than the
# statistics of a whole lane would save.
MEMBERS_SCORED = 5_000

# A `match` keeping at most this many records (by the maintained counts) has its
# vectors compared exactly rather than found by walking the index.
EXACT_SCAN_MAX = 5_000

# A row fetched through the GIN index costs about this many rows walked newest first
# (a bitmap heap scan visits a page a match; a walk reads each page's rows in turn).
WALK_COST = 10


@dataclass(frozen=True)
class LanePlan:
    """How one lane's candidates are read and scored."""

    lane: str
    config: str
    # The tsquery (as text) whose matches are the lane's candidates; "" matches none.
    query: str
    # The tsquery of every term, for highlights (STRICT: the query).
    marks: str
    walk: bool
    # The lane's terms: lexeme, the query's word for it, and its weight (inverse
    # document frequency in the caller's lanes).
    lexemes: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    idfs: tuple[float, ...] = ()
    # Quoted phrases (tsquery text) and their weights.
    phrases: tuple[str, ...] = ()
    phrase_idfs: tuple[float, ...] = ()

    def row(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "config": self.config,
            "query": self.query,
            "marks": self.marks,
            "walk": self.walk,
            "lexemes": list(self.lexemes),
            "words": list(self.words),
            "idfs": list(self.idfs),
            "phrases": list(self.phrases),
            "phrase_idfs": list(self.phrase_idfs),
        }


@dataclass(frozen=True)
class Plan:
    """A text search's plan: each lane's, the average length of the caller's records,
    the query's terms (as written), those dropped, and whether every term reads its
    matches (false: the count is a lower bound)."""

    lanes: tuple[LanePlan, ...]
    average_length: float = 1.0
    terms: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    complete: bool = True
    # Terms no record the caller reads holds.
    unknown: tuple[str, ...] = ()

    def values(self, prefix: str) -> dict[str, Any]:
        """The statement's values this plan gives (each name after `prefix`)."""
        return {
            prefix + "text_plan": json.dumps([lane.row() for lane in self.lanes]),
            prefix + "average_length": self.average_length,
        }


def idf(records: int, holding: int) -> float:
    """Inverse document frequency as Lucene computes it: never negative, so a word most
    records hold still counts a little."""
    records = max(records, holding)
    return math.log(1 + (records - holding + 0.5) / (holding + 0.5))


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("'", "''") + "'"


def _or(lexemes: Sequence[str]) -> str:
    return " | ".join(_quote(x) for x in lexemes)


def _walk(records: int, matches: float) -> bool:
    """Whether walking a lane's rows newest first finds COUNT_BUDGET of `matches` (an
    estimate) sooner than the index reads them all."""
    if matches <= COUNT_BUDGET or records <= 0:
        return False
    share = matches / records
    return COUNT_BUDGET / share < WALK_COST * matches


async def plan(
    db: Reader,
    lanes: Sequence[str],
    text: str,
    syntax: Syntax,
    prefix: bool = False,
    members: int | None = None,
    as_of: bool = False,
) -> Plan:
    """The plan of a text search of `lanes` (those the caller reads and chose); `prefix`:
    STRICT's last word matches as a prefix; `members`: about how many records `match`
    keeps (None: no match); `as_of`: it reads an earlier instant. Narrowed by a match,
    lanes are read from the index, joined to the members, and every term of a match of
    at most MEMBERS_SCORED records reads candidates."""
    narrowed = members is not None
    languages, counts = await read_words(db, lanes, text)
    records = sum(c.records for c in counts.values())
    length = sum(c.lexemes for c in counts.values())
    holding: dict[str, int] = {}
    for c in counts.values():
        for lexeme, n in c.holding.items():
            holding[lexeme] = holding.get(lexeme, 0) + n
    terms = list(dict.fromkeys(t for w in languages for t in w.kept.values()))
    kept = set(terms)
    dropped = list(dict.fromkeys(t for w in languages for t in w.dropped if t not in kept))
    unknown = [
        t
        for t in terms
        if not any(holding.get(x) for w in languages for x, tw in w.kept.items() if tw == t)
    ]
    average = length / records if records else 1.0
    if syntax is Syntax.STRICT:
        built = [
            _strict_lane(lane, w, counts[lane], prefix, narrowed)
            for w in languages
            for lane in w.lanes
            if w.strict and (as_of or any(counts[lane].holding.get(x) for x in w.kept))
        ]
        return Plan(tuple(built), average, tuple(terms), tuple(dropped), True, tuple(unknown))
    # A word no current record holds weighs as the rarest: a search as of an earlier
    # instant finds it in the versions held then (the statistics are today's).
    weights = {x: idf(records, max(holding.get(x, 0), 1)) for w in languages for x in w.kept}
    # The terms that read candidates: the rarest first, while their postings fit.
    ranked = sorted(weights, key=lambda x: (holding.get(x, 0), x))
    chosen: list[str] = []
    postings = 0
    all_read = members is not None and members <= MEMBERS_SCORED
    for lexeme in ranked:
        if chosen and not all_read and postings + holding.get(lexeme, 0) > COUNT_BUDGET:
            break
        chosen.append(lexeme)
        postings += holding.get(lexeme, 0)
    built = []
    for w in languages:
        phrases, phrase_idfs = [], []
        for phrase in w.phrases:
            inside = [x.replace("''", "'") for x in LEXEME.findall(phrase)]
            rarest = min((holding.get(x, 0) for x in inside), default=0)
            if rarest:
                phrases.append(phrase)
                phrase_idfs.append(idf(records, rarest))
        lexemes = [x for x in w.kept if x in weights]
        reading = [x for x in lexemes if x in chosen]
        for lane in w.lanes:
            c = counts[lane]
            # A lane none of whose records holds a word now is not read for it (the index's
            # entries for the word are other lanes'); as of an earlier instant, it may have.
            mine = [x for x in reading if as_of or c.holding.get(x)]
            if not mine:
                continue
            walk = not narrowed and _walk(c.records, sum(c.holding.get(x, 0) for x in mine))
            built.append(
                LanePlan(
                    lane,
                    w.config,
                    _or(mine),
                    _or(lexemes),
                    walk,
                    tuple(lexemes),
                    tuple(w.kept[x] for x in lexemes),
                    tuple(weights[x] for x in lexemes),
                    tuple(phrases),
                    tuple(phrase_idfs),
                )
            )
    complete = len(chosen) == len(weights) and (all_read or postings <= COUNT_BUDGET)
    return Plan(tuple(built), average, tuple(terms), tuple(dropped), complete, tuple(unknown))


def _strict_lane(
    lane: str, words: Words, counts: word_counts.LaneCounts, prefix: bool, narrowed: bool
) -> LanePlan:
    query = words.strict
    if prefix and query.endswith("'"):
        query += ":*"
    lexemes = [x for x in words.kept]
    walk = False
    if not narrowed and query and "|" not in query and "!" not in query and counts.records:
        share = 1.0
        for x in {y.replace("''", "'") for y in LEXEME.findall(query)}:
            share *= counts.holding.get(x, 0) / counts.records
        walk = _walk(counts.records, share * counts.records)
    return LanePlan(
        lane,
        words.config,
        query,
        query,
        walk,
        tuple(lexemes),
        tuple(words.kept[x] for x in lexemes),
        tuple(0.0 for _ in lexemes),
    )


async def plan_search(db: Reader, values: dict[str, Any], prefix: str) -> Plan | None:
    """Decide how a bound search (`arguments.bind`) reads, from what the database holds on
    the request's snapshot, and put the decisions among its statement's values (each name
    after `prefix`); the statement's text does not change with them.

    1. How many records `match` keeps, by the maintained member counts (`narrowing`),
       among the lanes it reads and those its vector is compared in: one statement.
    2. Its text's plan (`plan`): the terms that find candidates, each lane's read from the
       GIN index or walked newest first, and the terms' weights; with how the query was
       read (terms, dropped, hint) for the answer.
    3. Whether its vector list compares the members of `match` exactly (`exact_vectors`:
       they are at most EXACT_SCAN_MAX) or walks each lane's index, checking each record
       the walk reaches.

    Returns the text's plan (None: a search by vector alone)."""
    text, vector = prefix + "text" in values, prefix + "vector" in values
    lanes = (("lanes",) if text else ()) + (("vector_lanes",) if vector else ())
    kept = await members_kept(db, values, prefix, lanes)
    if vector and kept is not None:
        values[prefix + "exact_vectors"] = kept[-1] <= EXACT_SCAN_MAX
    if not text:
        return None
    return await plan_text(db, values, prefix, None if kept is None else kept[0])


async def plan_text(db: Reader, values: dict[str, Any], prefix: str, members: int | None) -> Plan:
    """The plan of a bound search's text (`members`: about how many records its `match`
    keeps, None: no match), its values put in `values` (what the statement takes, and how
    the query was read: terms, dropped, hint)."""
    syntax = values[prefix + "syntax"]
    found = await plan(
        db,
        values[prefix + "lanes"],
        values[prefix + "text"],
        syntax,
        values[prefix + "prefix"],
        members,
        values[prefix + "as_of"] is not None,
    )
    values.update(found.values(prefix))
    values[prefix + "text_complete"] = found.complete
    values[prefix + "terms"], values[prefix + "dropped"] = list(found.terms), list(found.dropped)
    values[prefix + "hint"] = hint(found, syntax)
    return found
