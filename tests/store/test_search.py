"""Search over the words index: ranking, syntax, highlights, filters, time and lanes.

Records are written through one gateway's write path (the index moves in the write's
transaction); the searches run the store's function on a plain connection.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from asyncpg import Connection

from store.errors import InvalidInputError
from store.kinds.record.search.arguments import MAX_QUERY_CHARS, SearchArgs, prefix_last
from store.kinds.record.search.find import Hit, search
from store.kinds.record.search.terms import Syntax
from store.kinds.record.words import language, relanguage
from store.operations.verify import verify
from store.reads.gather_mode import GatherMode
from store.reads.pages import Page
from tests.gql._api import RETIRE_RECORD, UPDATE, ingest, unique
from tests.store import _two_lanes
from tests.store._two_lanes import BOTH
from tests.support import Gateway

# The module's gateway and a plain connection to its database.
gateway, conn = _two_lanes.gateway, _two_lanes.conn


async def find(
    conn: Connection,
    text: str,
    lanes: list[str] | None = None,
    match: list[str] | None = None,
    **kw: Any,
) -> Page[Hit]:
    first = kw.pop("first", None)
    # This module's searches are the strict syntax's (every word required).
    given: dict[str, Any] = {"mode": GatherMode.INTERSECT, "source_types": None, "as_of": None}
    given |= {"after": None, "syntax": Syntax.STRICT, **kw}
    return await search(conn, SearchArgs(text, match, lanes=lanes or BOTH, **given), first)


def ids(page: Page[Hit]) -> list[str]:
    return [h.id for h in page.items]


async def test_ranking_and_highlights_on_a_fixed_corpus(gateway: Gateway, conn: Connection) -> None:
    word = unique("w")
    dense = await ingest(gateway, f"{word} renewal: the {word} renewal is at risk", lane="notes")
    sparse = await ingest(gateway, f"{word} one line\nand much later the renewal", lane="notes")
    other = await ingest(gateway, f"{word} nothing to see", lane="notes")

    page = await find(conn, f"{word} renewal")
    assert ids(page) == [dense["id"], sparse["id"]]
    assert page.total_count == 2
    assert [h.text_rank for h in page.items] == [1, 2]
    assert page.items[0].score > page.items[1].score
    top = page.items[0]
    content = dense["content"]
    assert [(h.text, h.start, h.end) for h in top.highlights] == [
        (word, 0, len(word)),
        ("renewal", len(word) + 1, len(word) + 8),
        (word, content.index(word, 1), content.index(word, 1) + len(word)),
        ("renewal", content.rindex("renewal"), content.rindex("renewal") + 7),
    ]
    for h in top.highlights:
        assert content[h.start : h.end] == h.text
    assert other["id"] not in ids(page)


async def test_phrase_or_not_and_prefix(gateway: Gateway, conn: Connection) -> None:
    word = unique("p")
    a = await ingest(gateway, f"{word} quarterly renewal risk", lane="notes")
    b = await ingest(gateway, f"{word} risk of renewal, quarterly", lane="notes")
    c = await ingest(gateway, f"{word} churn warning", lane="notes")

    assert ids(await find(conn, f'{word} "renewal risk"')) == [a["id"]]
    assert set(ids(await find(conn, f"{word} renewal or churn"))) == {a["id"], b["id"], c["id"]}
    assert ids(await find(conn, f"{word} renewal -quarterly")) == []
    assert ids(await find(conn, f"{word} -renewal")) == [c["id"]]
    # The last word as it is being typed matches as a prefix; an earlier one does not.
    assert ids(await find(conn, f"{word} chur")) == [c["id"]]
    assert ids(await find(conn, f"chur {word}")) == []
    # Unbalanced quotes, stray operators: no error, a query of what words there are.
    assert ids(await find(conn, f'{word} churn (( "warning')) == [c["id"]]
    assert ids(await find(conn, "!!! ---")) == []


def test_which_last_words_are_prefixes() -> None:
    assert prefix_last("renewal ri")
    assert not prefix_last('"renewal risk"')
    assert not prefix_last("renewal -risk")
    assert not prefix_last("renewal or")
    assert not prefix_last('renewal "ri')


async def test_bad_input_is_refused_naming_the_problem(conn: Connection) -> None:
    for text, problem in (
        ("  ", "text is empty"),
        ("x" * (MAX_QUERY_CHARS + 1), f"at most {MAX_QUERY_CHARS}"),
    ):
        with pytest.raises(InvalidInputError, match=problem):
            await find(conn, text)
    with pytest.raises(InvalidInputError, match="first must be between"):
        await find(conn, "renewal", first=501)
    with pytest.raises(InvalidInputError, match="cursor"):
        await find(conn, "renewal", after="bm90IGEgY3Vyc29y")


async def test_exact_filters_compose_with_words(gateway: Gateway, conn: Connection) -> None:
    word, org = unique("m"), unique("Org")
    acme = await ingest(gateway, f"{word} renewal", [f"org:{org}", "topic:deal"], lane="notes")
    await ingest(gateway, f"{word} renewal", [f"org:{org}x"], lane="notes")
    doc = await ingest(
        gateway, f"{word} renewal", [f"org:{org}"], lane="notes", sourceType="documentary"
    )

    assert set(ids(await find(conn, word, match=[f"org:{org}"]))) == {acme["id"], doc["id"]}
    both = await find(conn, word, match=[f"org:{org}", "topic:deal"])
    assert ids(both) == [acme["id"]] and both.total_count == 1
    union = await find(conn, word, match=[f"org:{org}", f"org:{org}x"], mode=GatherMode.UNION)
    assert union.total_count == 3
    typed = await find(conn, word, source_types=["documentary"])
    assert ids(typed) == [doc["id"]]


async def test_paging_walks_every_hit_once(gateway: Gateway, conn: Connection) -> None:
    word = unique("g")
    written = {(await ingest(gateway, f"{word} " * n, lane="notes"))["id"] for n in range(1, 6)}
    seen: list[str] = []
    after = None
    while True:
        page = await find(conn, word, first=2, after=after)
        assert page.total_count == 5
        seen.extend(ids(page))
        if not page.has_next_page:
            break
        after = page.end_cursor
    assert set(seen) == written and len(seen) == 5


async def test_as_of_reads_the_words_of_then(gateway: Gateway, conn: Connection) -> None:
    word = unique("t")
    record = await ingest(gateway, f"{word} original renewal", lane="notes")
    before_update = datetime.fromisoformat(record["updatedAt"])
    updated = (
        await gateway.data(UPDATE, {"id": record["id"], "content": f"{word} revised churn"})
    )["update"]
    before_retire = datetime.fromisoformat(updated["updatedAt"])
    await gateway.data(RETIRE_RECORD, {"id": record["id"], "reason": "gone"})

    then = await find(conn, f"{word} renewal", as_of=before_update)
    assert ids(then) == [record["id"]]
    assert then.items[0].highlights[1].text == "renewal"
    assert ids(await find(conn, f"{word} churn", as_of=before_update)) == []
    assert ids(await find(conn, f"{word} churn", as_of=before_retire)) == [record["id"]]
    assert ids(await find(conn, f"{word} renewal", as_of=before_retire)) == []
    # Retired now: absent from every current search.
    assert (await find(conn, word)).total_count == 0


async def test_a_lane_not_read_contributes_nothing(gateway: Gateway, conn: Connection) -> None:
    word = unique("s")
    mine = await ingest(gateway, f"{word} renewal", lane="notes")
    await ingest(gateway, f"{word} renewal renewal", lane="secret")
    page = await find(conn, word, lanes=["notes"])
    assert ids(page) == [mine["id"]] and page.total_count == 1
    assert page.items[0].text_rank == 1


async def test_a_lane_in_another_language_is_rebuilt_and_verified(
    gateway: Gateway, conn: Connection
) -> None:
    word = unique("l")
    record = await ingest(gateway, f"{word} renewals were risky", lane="secret")
    assert ids(await find(conn, f"renewal {word}", lanes=["secret"])) == []
    done: list[tuple[int, int]] = []
    await relanguage(conn, "secret", "english", lambda n, total: done.append((n, total)))
    assert await language(conn, "secret") == "english"
    assert done and done[-1][0] == done[-1][1]
    hit = await find(conn, f"renewal {word}", lanes=["secret"])
    assert ids(hit) == [record["id"]]
    assert [h.text for h in hit.items[0].highlights] == [word, "renewals"]
    # Written after the change: in the new language at once.
    later = await ingest(gateway, f"{word} renewing", lane="secret")
    assert later["id"] in ids(await find(conn, f"{word} renew", lanes=["secret"]))
    report = await verify(gateway.database_url)
    assert report.ok, report.problems


async def test_verify_reports_words_that_differ(gateway: Gateway, conn: Connection) -> None:
    record = await ingest(gateway, unique("v") + " tampered", lane="notes")
    await conn.execute(
        "UPDATE record_words SET words = to_tsvector('simple', 'other') WHERE record_id = $1",
        record["id"],
    )
    try:
        report = await verify(gateway.database_url)
        assert f"{record['id']}: words of version 1 differ from its content" in report.problems
    finally:
        await conn.execute(
            "UPDATE record_words SET words = to_tsvector(edgeloom_search_config(lane), $2) "
            "WHERE record_id = $1",
            record["id"],
            record["content"],
        )


async def test_equal_scores_list_the_newest_first_and_page_through_once(
    gateway: Gateway, conn: Connection
) -> None:
    word = unique("e")
    written = [(await ingest(gateway, f"{word} same", lane="notes"))["id"] for _ in range(4)]
    seen, ranks, after = [], [], None
    for _ in range(4):
        page = await find(conn, word, first=1, after=after)
        seen.extend(ids(page))
        ranks.extend(h.text_rank for h in page.items)
        after = page.end_cursor
    assert seen == written[::-1] and ranks == [1, 2, 3, 4]
