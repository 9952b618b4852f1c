"""Search past its count budget: the newest matches are the ones ranked.

The budget is made small (2) for the module's searches, so that a handful of records
crosses it; the statement is the one every search runs, built again with that value.
Each test runs once for each way the statement may read a lane's matches (what the
planner would choose by the lane's statistics, forced here): walking each lane newest
first, and from the index. Each must give the same hits.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
from asyncpg import Connection

from store.kinds.record.search import planner
from store.kinds.record.search.planner import Syntax
from store.kinds.record.search.statement import search_statement
from store.reads.gather_mode import GatherMode
from tests.gql._api import RETIRE_RECORD, ingest, unique
from tests.store import _two_lanes
from tests.store._two_lanes import BOTH
from tests.store.test_search import find, ids
from tests.support import Gateway

gateway, conn = _two_lanes.gateway, _two_lanes.conn


# Whether each lane is walked: each way the planner may choose.
READS = {"walked": True, "indexed": False}


@pytest.fixture(params=list(READS))
def small_budgets(request: pytest.FixtureRequest) -> Iterator[None]:
    was = planner.COUNT_BUDGET, planner._walk
    walked = READS[request.param]
    planner.COUNT_BUDGET = 2
    planner._walk = lambda records, matches: walked  # type: ignore[assignment]
    search_statement.cache_clear()
    try:
        yield
    finally:
        planner.COUNT_BUDGET, planner._walk = was
        search_statement.cache_clear()


async def write(gateway: Gateway, word: str, times: int, **fields: object) -> dict[str, object]:
    """A record holding `word` `times` times (more: a higher score)."""
    return await ingest(gateway, f"{word} " * times + "end", **fields)


@pytest.mark.usefixtures("small_budgets")
async def test_within_the_budget_every_match_is_ranked(gateway: Gateway, conn: Connection) -> None:
    word = unique("u")
    best = await write(gateway, word, 5, lane="notes")
    later = await write(gateway, word, 1, lane="secret")
    page = await find(conn, word)
    assert (page.total_count, page.total_exact) == (2, True)
    assert ids(page) == [best["id"], later["id"]]


@pytest.mark.usefixtures("small_budgets")
async def test_past_the_budget_the_newest_matches_are_ranked(
    gateway: Gateway, conn: Connection
) -> None:
    word = unique("o")
    best = await write(gateway, word, 5, lane="notes")
    await write(gateway, word, 1, lane="notes")
    older = await write(gateway, word, 1, lane="notes")
    # The two newest, one in each lane: each lane's newest, merged by time.
    newer = await write(gateway, word, 3, lane="secret")
    newest = await write(gateway, word, 2, lane="notes")

    page = await find(conn, word)
    assert (page.total_count, page.total_exact) == (2, False)
    # Ranked among themselves by score; the best match of all, older, is not among them.
    assert ids(page) == [newer["id"], newest["id"]]
    assert [h.text_rank for h in page.items] == [1, 2]
    assert best["id"] not in ids(page) and older["id"] not in ids(page)
    # A lane not read: its match neither ranked nor counted.
    notes = await find(conn, word, lanes=["notes"])
    assert (notes.total_count, notes.total_exact) == (2, False)
    assert ids(notes) == [newest["id"], older["id"]]


@pytest.mark.usefixtures("small_budgets")
async def test_past_the_budget_pages_walk_the_ranked_hits_once(
    gateway: Gateway, conn: Connection
) -> None:
    word = unique("q")
    for n in range(5):
        await write(gateway, word, n + 1, lane="notes")
    whole = await find(conn, word)
    seen, ranks, after = [], [], None
    while True:
        page = await find(conn, word, first=1, after=after)
        assert (page.total_count, page.total_exact) == (2, False)
        seen.extend(ids(page))
        ranks.extend(h.text_rank for h in page.items)
        if not page.has_next_page:
            break
        after = page.end_cursor
    assert seen == ids(whole) and len(seen) == 2 and ranks == [1, 2]


@pytest.mark.usefixtures("small_budgets")
async def test_past_the_budget_as_of_ranks_the_newest_held_then(
    gateway: Gateway, conn: Connection
) -> None:
    word = unique("a")
    written = [await write(gateway, word, 1, lane="notes") for _ in range(4)]
    then = datetime.fromisoformat(str(written[-1]["updatedAt"]))
    after = await write(gateway, word, 1, lane="notes")
    await gateway.data(RETIRE_RECORD, {"id": written[-1]["id"], "reason": "gone"})

    past = await find(conn, word, as_of=then)
    assert (past.total_count, past.total_exact) == (2, False)
    assert set(ids(past)) == {written[2]["id"], written[3]["id"]}
    # Now: the retired record is out, the later one in.
    now = await find(conn, word)
    assert (now.total_count, now.total_exact) == (2, False)
    assert set(ids(now)) == {after["id"], written[2]["id"]}


@pytest.mark.usefixtures("small_budgets")
async def test_past_the_budget_the_filters_narrow_before_the_newest_are_taken(
    gateway: Gateway, conn: Connection
) -> None:
    word, org = unique("f"), f"org:{unique('Org')}"
    kept = [await write(gateway, word, 1, properties=[org], lane="notes") for _ in range(4)]
    for _ in range(2):
        await write(gateway, word, 1, lane="notes")
    typed = await write(gateway, word, 1, properties=[org], lane="notes", sourceType="documentary")

    page = await find(conn, word, match=[org])
    assert (page.total_count, page.total_exact) == (2, False)
    assert set(ids(page)) == {typed["id"], kept[3]["id"]}
    either = await find(conn, word, match=[org, "topic:none"], mode=GatherMode.UNION)
    assert set(ids(either)) == set(ids(page))
    plain = await find(conn, word, match=[org], source_types=["conversational"])
    assert set(ids(plain)) == {kept[2]["id"], kept[3]["id"]}


async def test_each_lane_is_walked_by_its_own_statistics(
    gateway: Gateway, conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    common, rare = unique("c"), unique("r")
    for n in range(30):
        await ingest(gateway, f"{common} filler{n}", lane="notes")
    await ingest(gateway, f"{rare} {common}", lane="secret")
    for n in range(5):
        await ingest(gateway, f"other{n}", lane="secret")
    monkeypatch.setattr(planner, "COUNT_BUDGET", 2)

    async def walked(text: str, lanes: list[str], members: int | None = None) -> dict[str, bool]:
        found = await planner.plan(conn, lanes, text, Syntax.STRICT, members=members)
        return {lane.lane: lane.walk for lane in found.lanes}

    # The word most of notes' rows hold is walked for there, and not in secret, where
    # one row in six holds it; a lane none of whose rows holds a word is not read for it;
    # a `match` is read from the index, which joins it to its members.
    assert await walked(common, BOTH) == {"notes": True, "secret": False}
    assert await walked(common, ["notes"]) == {"notes": True}
    assert await walked(rare, BOTH) == {"secret": False}
    assert await walked(common, BOTH, members=30) == {"notes": False, "secret": False}
