"""A search on the resolver path: its arguments bound, its text planned, its statement
run on the request's snapshot, and its rows made hits."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from store.kinds.record.search import planner
from store.kinds.record.search.arguments import SearchArgs, bind
from store.kinds.record.search.hints import NO_VECTOR_HIT, hint
from store.kinds.record.search.statement import search_statement
from store.reads.pages import Page, encode_cursor, page_size
from store.reads.snapshot import Reader


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
    plan = await planner.plan_search(db, values, "")
    if not highlights:
        shape = replace(shape, highlights=False)
    statement = search_statement(shape, count)
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
    suggested = None
    if not found and args.after is None:
        suggested = hint(plan, args.syntax) if plan else NO_VECTOR_HIT
    terms, dropped = (plan.terms, plan.dropped) if plan else ((), ())
    return Hits(items, total, len(found) > size, end, exact, terms, dropped, suggested)


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
