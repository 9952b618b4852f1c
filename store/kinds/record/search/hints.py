"""What a search that found nothing suggests trying: from how its text was read (its
plan), or, by vector alone, what a vector is compared with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.kinds.record.search.terms import Syntax

if TYPE_CHECKING:
    from store.kinds.record.search.planner import Plan


def hint(plan: Plan, syntax: Syntax) -> str:
    """What to try when a search found nothing."""
    if not plan.terms:
        if plan.dropped:
            return (
                f"every word of the query is too common to search by ({', '.join(plan.dropped)}): "
                "add a word that names what you look for"
            )
        return "the query holds no word to search by: give words, or a vector"
    if plan.unknown and len(plan.unknown) == len(plan.terms):
        return (
            f"no record you can read holds {', '.join(plan.unknown)}: try other words for it, "
            "another lane, or a vector"
        )
    if syntax is Syntax.STRICT:
        return (
            "syntax STRICT requires every word: leave syntax out to rank records by the words "
            "they hold, or drop a word"
        )
    return "no record matches within the filters given: widen match, lanes, sourceTypes or asOf"


# What an empty search by vector alone suggests.
NO_VECTOR_HIT = (
    "no record you can read has a vector of this size within the filters given: check the "
    "lanes' embedding (policy) and widen match, lanes or asOf"
)
