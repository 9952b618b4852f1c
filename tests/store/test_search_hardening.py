"""Search against what another agent's lane holds, and against one record built to stall
it: the fourth hardening round's search items."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asyncpg import Connection

from store.errors import InvalidInputError
from store.kinds.record.search import highlights, planner
from store.kinds.record.search.arguments import SearchArgs, search_cursor
from store.kinds.record.search.find import Hits, search
from store.kinds.record.search.planner import Syntax
from store.kinds.record.search.statement import search_statement
from store.reads.gather_mode import GatherMode
from store.reads.pages import encode_cursor
from tests.gql._api import ingest, unique
from tests.store import _two_lanes
from tests.support import Gateway

POLICY = """
lanes:
  la: { text_search: simple }
  va: { text_search: simple }
  bob: { text_search: simple }
agents:
  dev: { read: [la, va, bob], write: [la, va, bob] }
"""
ALICE = ["la", "va"]


gateway, conn = _two_lanes.gateway_under(POLICY), _two_lanes.conn


@pytest.fixture
def small_budget() -> Iterator[None]:
    was = planner.COUNT_BUDGET
    planner.COUNT_BUDGET = 3
    search_statement.cache_clear()
    try:
        yield
    finally:
        planner.COUNT_BUDGET = was
        search_statement.cache_clear()


async def find(conn: Connection, text: str, syntax: Syntax, **kw: Any) -> Hits:
    given: dict[str, Any] = {"match": None, "mode": GatherMode.INTERSECT, "source_types": None}
    given |= {"as_of": None, "after": None, **kw}
    return await search(conn, SearchArgs(text, lanes=ALICE, syntax=syntax, **given), 5)


@pytest.mark.usefixtures("small_budget")
@pytest.mark.parametrize("syntax", list(Syntax))
async def test_past_the_budget_a_hidden_lane_changes_neither_plan_nor_newest(
    gateway: Gateway, conn: Connection, syntax: Syntax
) -> None:
    x, y = unique("x"), unique("y")
    # Alice's words laid out alike in her two lanes, the newest in `va`.
    written = []
    for n in range(4):
        for lane in ALICE:
            written.append(await ingest(gateway, f"{x} {y} n{n}", lane=lane))
    newest = [r["id"] for r in written[-3:]]

    async def alice() -> tuple[list[str], list[str], planner.Plan]:
        by_x, by_y = await find(conn, x, syntax), await find(conn, y, syntax)
        plan = await planner.plan(conn, ALICE, x, syntax)
        return [h.id for h in by_x.items], [h.id for h in by_y.items], plan

    before = await alice()
    # Bob's own lane: the word x in many rows, y in none.
    for n in range(12):
        await ingest(gateway, f"{x} filler{n}", lane="bob")
    await conn.execute("ANALYZE record_words")
    after = await alice()
    assert after == before
    # Past the budget of 3 the three newest matches are ranked, in both of her lanes.
    assert sorted(after[0]) == sorted(newest) and sorted(after[1]) == sorted(newest)


def test_a_cursor_with_a_score_past_float32_is_refused() -> None:
    for score in ("1e39", "-1e39", "nan", "inf"):
        forged = encode_cursor([score, "2026-12-07T00:00:00+00:00", "sr_x"])
        with pytest.raises(InvalidInputError, match="is not one this list gave out"):
            search_cursor(forged)
    assert search_cursor(encode_cursor(["3e38", "2026-12-07T00:00:00+00:00", "sr_x"]))


async def test_a_record_of_one_word_repeated_costs_its_highlights_once(
    gateway: Gateway, conn: Connection
) -> None:
    word = unique("rep")
    # 60,000 occurrences in 600,000 characters: a highlight loop over every marker took
    # minutes; the statement must end well within a request's time.
    record = await ingest(gateway, f"{word} " * 60_000, lane="la")
    await conn.execute("SET statement_timeout = '20s'")
    found = await find(conn, word, Syntax.NATURAL)
    [hit] = found.items
    assert hit.id == record["id"] and len(hit.highlights) == highlights.MAX_HIGHLIGHTS
    step = len(word) + 1
    assert [h.start for h in hit.highlights] == [n * step for n in range(50)]
    assert all(h.text == word for h in hit.highlights)
    # Not asked for, not computed: the same search without them.
    asked = SearchArgs(word, None, GatherMode.INTERSECT, ALICE, None, None, None)
    bare = await search(conn, asked, 5, highlights=False)
    assert bare.items[0].highlights == ()


@pytest.mark.parametrize("syntax", list(Syntax))
async def test_a_word_only_a_hidden_lane_holds_reads_nothing(
    gateway: Gateway, conn: Connection, syntax: Syntax
) -> None:
    # The same empty answer, and no index read for it: nothing in the plan depends on
    # how often the word occurs where the caller cannot read.
    word = unique("hidden")
    for n in range(5):
        await ingest(gateway, f"{word} filler{n}", lane="bob")
    plan = await planner.plan(conn, ALICE, word, syntax)
    assert plan.lanes == () and plan.unknown == (word.lower(),)
    assert (await find(conn, word, syntax)).items == []
    # As of an earlier instant her lanes may have held it: they are read then.
    earlier = await planner.plan(conn, ALICE, word, syntax, as_of=True)
    assert {lane.lane for lane in earlier.lanes} == set(ALICE)
