"""Finding what you have no label for: the `search` and `values` query fields and their
types."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Any

import strawberry

from gql.api import descriptions as d
from gql.api.compiled.fields import compiled, served
from gql.api.page_types import PageInfo, page_info
from gql.api.reads import find
from gql.api.session import vector_scope
from gql.api.types import GatherMode, Info, Record
from store.kinds.record import values_compiled as values_sql
from store.kinds.record.reads import values as store_values
from store.kinds.record.search import arguments, fusion, highlights, planner, vector_hits
from store.kinds.record.search import compiled_json as sql
from store.kinds.record.search.find import Highlight as FoundHighlight
from store.reads.compiled_sql import Compiler, column


def _arg(text: str) -> Any:
    return strawberry.argument(description=text)


@strawberry.type(description="One matched word: as written in the content, and where.")
class Highlight:
    text: str = strawberry.field(
        description="The matched word as the content writes it.",
        metadata=compiled(sql.highlight_text),
    )
    start: int = strawberry.field(
        description="Where it starts in the record's content at the version read: an offset "
        "in Unicode code points from 0.",
        metadata=compiled(sql.highlight_start),
    )
    end: int = strawberry.field(
        description="Where it ends (exclusive), in code points.",
        metadata=compiled(sql.highlight_end),
    )

    @classmethod
    def from_domain(cls, found: FoundHighlight) -> Highlight:
        return cls(text=found.text, start=found.start, end=found.end)


@strawberry.type(description="A record a search found, with why it ranks where it does.")
class SearchHit:
    record: Record = strawberry.field(
        description="The record, at the version read.", metadata=compiled(sql.hit_record)
    )
    score: float = strawberry.field(
        description="Higher is better: for text alone its BM25 score over the query's words "
        "it holds (rare words weigh more, a repeated word saturates, a long record is not "
        "favoured for its length; syntax STRICT: ts_rank_cd); for a vector alone its cosine "
        f"similarity (1 - cosine distance); for both, {fusion.TEXT_WEIGHT} times its "
        "text score over the most any record could score for the query (each word's idf "
        f"times k1 + 1) plus {round(1 - fusion.TEXT_WEIGHT, 2)} times (1 + its "
        "similarity) / 2, a hit of the text list alone compared with the vector all the same "
        "(0 for no words held, or no vector). Past the count budget "
        "(totalCountExact false) the "
        f"text list is the {planner.COUNT_BUDGET:,} newest matches, ranked among "
        "themselves.",
        metadata=compiled(sql.hit_score),
    )
    matched_terms: list[str] = strawberry.field(
        description="The query's words it holds (as the query wrote them), in the query's "
        "order; empty for a hit by vector alone.",
        metadata=compiled(sql.hit_matched),
    )
    text_rank: int | None = strawberry.field(
        description="Its place (1 = first) in the text list; null when not in it.",
        metadata=compiled(sql.hit_text_rank),
    )
    vector_rank: int | None = strawberry.field(
        description="Its place (1 = first) in the vector list; null when not in it.",
        metadata=compiled(sql.hit_vector_rank),
    )
    highlights: list[Highlight] = strawberry.field(
        description=f"The words the query matched, in content order (at most "
        f"{highlights.MAX_HIGHLIGHTS}).",
        metadata=compiled(sql.hit_highlights),
    )


@strawberry.type(
    description="A page of search hits, best first, with how many there are. A search with "
    f"at most {planner.COUNT_BUDGET:,} text matches ranks them all; one with more ranks "
    f"its {planner.COUNT_BUDGET:,} newest matches (newest by the version's transaction "
    "time): a word in most records says little on its own, so narrow it with `match` or "
    "more words."
)
class SearchPage:
    items: list[SearchHit] = strawberry.field(
        description="The hits of this page, best first.", metadata=compiled(sql.search_items)
    )
    total_count: int = strawberry.field(
        description=f"How many hits the whole search has, counted up to "
        f"{planner.COUNT_BUDGET:,}; past that, {planner.COUNT_BUDGET:,} and "
        "totalCountExact false. A vector list holds at most "
        f"{vector_hits.VECTOR_DEPTH} (its nearest).",
        metadata=compiled(sql.search_total),
    )
    total_count_exact: bool = strawberry.field(
        description="Whether totalCount is exact (false: a lower bound; with text, the text "
        f"hits ranked are then the {planner.COUNT_BUDGET:,} newest matches, or the "
        "records holding the query's rarer words, its commonest left to score them).",
        metadata=compiled(sql.total_exact),
    )
    terms: list[str] = strawberry.field(
        description="The words of the query searched for, as it wrote them (lower-cased).",
        metadata=compiled(sql.search_terms),
    )
    dropped: list[str] = strawberry.field(
        description="The words of the query left out as too common to search by (the "
        "lanes' language's stop words): rephrase with words that name what you look for.",
        metadata=compiled(sql.search_dropped),
    )
    hint: str | None = strawberry.field(
        description="When the search found nothing: what to try instead. Null otherwise.",
        metadata=compiled(sql.search_hint),
    )
    page_info: PageInfo = strawberry.field(
        description="Whether more follow, and the cursor.", metadata=compiled(Compiler.page_info)
    )


@strawberry.type(description="A value of a label, with how many records you can read carry it.")
class ValueCount:
    label: str = strawberry.field(description="The label.", metadata=compiled(column("label")))
    value: str = strawberry.field(description="The value.", metadata=compiled(column("value")))
    property: str = strawberry.field(
        description="label:value, as written on records.",
        metadata=compiled(values_sql.value_property),
    )
    member_count: int = strawberry.field(
        description="How many records you can read carry it.",
        metadata=compiled(column("member_count")),
    )

    @classmethod
    def from_domain(cls, found: store_values.ValueCount) -> ValueCount:
        return cls(
            label=found.label,
            value=found.value,
            property=found.property,
            member_count=found.member_count,
        )


@strawberry.type(description="A page of a label's values, in value order.")
class ValuePage:
    items: list[ValueCount] = strawberry.field(
        description="The values of this page.", metadata=compiled(values_sql.value_items)
    )
    page_info: PageInfo = strawberry.field(
        description="Whether more follow, and the cursor.", metadata=compiled(Compiler.page_info)
    )


SEARCH_VECTOR = (
    "The vector of what to find (made by the model the lanes' policy names, of the size it "
    f"declares): the {vector_hits.VECTOR_DEPTH} nearest records by cosine distance among "
    "the lanes whose embedding has its size. With text, both lists are fused, each score "
    f"over its range (text weighing {fusion.TEXT_WEIGHT}: see score)."
)

SEARCH_TEXT = (
    "What to find, in your own words: a question or keywords. Every word counts and none is "
    'required; rare words weigh more; "a quoted phrase" also counts as a phrase. With '
    'syntax STRICT: PostgreSQL\'s websearch syntax (every word required, "a phrase", `or` '
    "between alternatives, -word to leave out, the last bare word also a prefix). At most "
    f"{arguments.MAX_QUERY_CHARS} characters."
)


@strawberry.enum(description="How search reads its text.")
class SearchSyntax(enum.Enum):
    NATURAL = strawberry.enum_value(
        "NATURAL",
        description="what an agent writes, a question or keywords: every word counts, none "
        "is required, ranked by BM25 (the default)",
    )
    STRICT = strawberry.enum_value(
        "STRICT",
        description='every word required, "phrases", or, -not and a prefix last word '
        "(PostgreSQL's websearch_to_tsquery), ranked by ts_rank_cd",
    )


@strawberry.type
class SearchQuery:
    @strawberry.field(
        description="Records by their words, asked in your own words (best first by BM25 "
        "over the words they hold, each with the query's words it holds and where), by your "
        "vector (nearest first), or both fused; narrowed to a gather by "
        "match, and to lanes, source types and an instant, like every other read: a record "
        "you cannot read, or retired then, is never found or counted, and its words never "
        f"weigh in your scores. Past {planner.COUNT_BUDGET:,} candidates only the "
        f"newest {planner.COUNT_BUDGET:,} are ranked: narrow a common word with match "
        "or rarer words.",
        metadata=served("search"),
    )
    async def search(
        self,
        info: Info,
        text: Annotated[str | None, _arg(SEARCH_TEXT)] = None,
        vector: Annotated[list[float] | None, _arg(SEARCH_VECTOR)] = None,
        match: Annotated[
            list[str] | None,
            _arg("Only records in this gather of edge properties (label:value), as gather."),
        ] = None,
        mode: Annotated[
            GatherMode | None, _arg("How match combines; default INTERSECT.")
        ] = GatherMode.INTERSECT,
        lanes: Annotated[list[str] | None, _arg(d.LANES_FILTER)] = None,
        source_types: Annotated[
            list[str] | None, _arg("Only records of these source types (as of the version read).")
        ] = None,
        as_of: Annotated[datetime | None, _arg(d.AS_OF)] = None,
        first: Annotated[int | None, _arg(d.FIRST)] = None,
        after: Annotated[str | None, _arg(d.AFTER)] = None,
        syntax: Annotated[
            SearchSyntax | None, _arg("How text is read; default NATURAL (your own words).")
        ] = SearchSyntax.NATURAL,
    ) -> SearchPage:
        policy, _ = await info.context.session.agent()
        scope = vector_scope(info.context.services, policy)
        page = await find(info, "search", scope=scope)
        found = await info.context.records([h.id for h in page.items], as_of)
        items = [
            SearchHit(
                record=Record.from_domain(found[h.id], as_of),
                score=h.score,
                text_rank=h.text_rank,
                vector_rank=h.vector_rank,
                highlights=[Highlight.from_domain(x) for x in h.highlights],
                matched_terms=list(h.matched),
            )
            for h in page.items
            if h.id in found
        ]
        return SearchPage(
            items=items,
            total_count=page.total_count or 0,
            total_count_exact=page.total_exact,
            page_info=page_info(page),
            terms=list(page.terms),
            dropped=list(page.dropped),
            hint=page.hint,
        )

    @strawberry.field(
        description="A label's values that records you can read carry now, in value order, "
        "each with how many carry it: see which exist before writing a new one. With "
        "similarTo, the values near the one given: the same but for case, accents, spacing "
        "or punctuation, or one letter apart (inserted, deleted, changed or swapped).",
        metadata=served("values"),
    )
    async def values(
        self,
        info: Info,
        label: Annotated[str, _arg("The label whose values to list, e.g. org.")],
        lane: Annotated[str | None, _arg(d.LANE_FILTER)] = None,
        prefix: Annotated[
            str | None, _arg("Only values starting with this (case and accents count).")
        ] = None,
        similar_to: Annotated[
            str | None, _arg("Only the values near this one (it left out), e.g. ACME.")
        ] = None,
        first: Annotated[int | None, _arg(d.FIRST)] = None,
        after: Annotated[str | None, _arg(d.AFTER)] = None,
    ) -> ValuePage:
        page = await find(info, "values")
        return ValuePage(
            items=[ValueCount.from_domain(v) for v in page.items], page_info=page_info(page)
        )
