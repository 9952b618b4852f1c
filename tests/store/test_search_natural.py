"""Search in an agent's own words (the default syntax): every word counts, none is
required, records ranked by BM25 over the statistics of the caller's lanes alone."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from asyncpg import Connection

from store.kinds.record.search import bm25, planner
from store.kinds.record.search.arguments import SearchArgs
from store.kinds.record.search.find import Hits, search
from store.kinds.record.search.planner import Syntax
from store.operations.verify import verify
from store.reads.gather_mode import GatherMode
from tests.gql._api import RETIRE_RECORD, UPDATE, ingest, unique
from tests.store import _two_lanes
from tests.support import Gateway

POLICY = """
lanes:
  notes: { text_search: english }
  plain: {}
  stuffed: {}
agents:
  dev: { read: [notes, plain, stuffed], write: [notes, plain, stuffed] }
"""


gateway, conn = _two_lanes.gateway_under(POLICY), _two_lanes.conn


async def find(conn: Connection, text: str, lanes: list[str], **kw: Any) -> Hits:
    first = kw.pop("first", 20)
    given: dict[str, Any] = {"match": None, "mode": GatherMode.INTERSECT, "source_types": None}
    given |= {"as_of": None, "after": None, **kw}
    return await search(conn, SearchArgs(text, lanes=lanes, **given), first)


def ids(page: Hits) -> list[str]:
    return [h.id for h in page.items]


async def test_a_question_finds_its_evidence_though_not_every_word_is_in_it(
    gateway: Gateway, conn: Connection
) -> None:
    who = unique("Sarah")
    evidence = await ingest(gateway, f"{who} took over the Acme account in March", lane="notes")
    await ingest(gateway, f"{who} likes coffee", lane="notes")
    await ingest(gateway, "The Acme office moved", lane="notes")
    question = f"When did {who} take over the Acme account?"

    found = await find(conn, question, ["notes"])
    assert ids(found)[0] == evidence["id"]
    # Strict syntax requires every word: "when" and "did" are in no record.
    strict = await find(conn, question, ["notes"], syntax=Syntax.STRICT)
    assert strict.items == []
    # English drops its stop words and stems the rest ("take" meets "took"? no: but
    # "account" and "acme" and the name do), and says which words it searched for.
    assert who.lower() in found.terms and "acme" in found.terms
    assert {"when", "did", "the"} <= set(found.dropped)
    assert set(found.items[0].matched) >= {who.lower(), "acme", "account"}


async def test_a_simple_lane_finds_the_evidence_too(gateway: Gateway, conn: Connection) -> None:
    # No stop words in `simple`: the common words weigh little by their frequency.
    who = unique("Dana")
    for n in range(6):
        await ingest(gateway, f"what did the team do on day {n}", lane="plain")
    evidence = await ingest(gateway, f"{who} signed the renewal", lane="plain")
    found = await find(conn, f"what did {who} sign?", ["plain"])
    assert ids(found)[0] == evidence["id"]
    assert found.dropped == ()


async def test_a_rare_word_outranks_a_common_one(gateway: Gateway, conn: Connection) -> None:
    common, rare = unique("common"), unique("rare")
    for n in range(8):
        await ingest(gateway, f"{common} filler number{n}", lane="plain")
    with_common = await ingest(gateway, f"{common} and more", lane="plain")
    with_rare = await ingest(gateway, f"{rare} and more", lane="plain")
    found = await find(conn, f"{common} {rare}", ["plain"])
    assert ids(found)[0] == with_rare["id"]
    scores = {h.id: h.score for h in found.items}
    assert scores[with_rare["id"]] > scores[with_common["id"]]


async def test_a_repeated_word_saturates_and_length_does_not_win(
    gateway: Gateway, conn: Connection
) -> None:
    word, other = unique("sat"), unique("pad")
    once = await ingest(gateway, f"{word} alpha", lane="plain")
    twice = await ingest(gateway, f"{word} {word} alpha", lane="plain")
    often = await ingest(gateway, f"{' '.join([word] * 20)} alpha", lane="plain")
    scores = {h.id: h.score for h in (await find(conn, word, ["plain"])).items}
    first, second = scores[twice["id"]] - scores[once["id"]], scores[often["id"]]
    # More occurrences score more, each less than the one before, towards a bound.
    assert scores[once["id"]] < scores[twice["id"]] < second
    assert second - scores[twice["id"]] < first * 18
    assert second < scores[once["id"]] * (bm25.K1 + 1)

    short = await ingest(gateway, f"{other} brief", lane="plain")
    padding = " ".join(f"w{n}" for n in range(60))
    long = await ingest(gateway, f"{other} {padding}", lane="plain")
    found = await find(conn, other, ["plain"])
    assert ids(found) == [short["id"], long["id"]]


async def test_a_lane_the_caller_cannot_read_changes_neither_scores_nor_order(
    gateway: Gateway, conn: Connection
) -> None:
    a, b = unique("alpha"), unique("beta")
    for text in (f"{a} {b} one", f"{a} two", f"{b} three", f"{a} {a} four"):
        await ingest(gateway, text, lane="plain")
    question = f"{a} or {b}?"
    before = await find(conn, question, ["plain"])
    plan_before = await planner.plan(conn, ["plain"], question, Syntax.NATURAL)

    # Another agent's lane, stuffed with the query's words in every proportion.
    for n in range(40):
        await ingest(gateway, f"{a} " * (n % 3 + 1) + f"{b} " * (n % 2), lane="stuffed")

    after = await find(conn, question, ["plain"])
    assert [(h.id, h.score) for h in after.items] == [(h.id, h.score) for h in before.items]
    assert await planner.plan(conn, ["plain"], question, Syntax.NATURAL) == plan_before
    # Read with that lane, the weights move: the statistics are the lanes read.
    both = await find(conn, question, ["plain", "stuffed"])
    shared = {h.id: h.score for h in both.items}
    assert any(shared.get(h.id) != h.score for h in before.items)


async def test_or_inside_a_question_is_a_word_and_a_phrase_is_a_phrase(
    gateway: Gateway, conn: Connection
) -> None:
    x, y = unique("x"), unique("y")
    near = await ingest(gateway, f"{x} {y} together", lane="plain")
    apart = await ingest(gateway, f"{y} far from {x}", lane="plain")
    # "or" is a word of the question, not an operator: both records hold x and y.
    found = await find(conn, f"{x} or {y}", ["plain"])
    assert set(ids(found)) == {near["id"], apart["id"]}
    assert "or" in found.terms
    phrase = await find(conn, f'"{x} {y}"', ["plain"])
    assert ids(phrase)[0] == near["id"]
    scores = {h.id: h.score for h in phrase.items}
    assert scores[near["id"]] > scores[apart["id"]]


async def test_as_of_reads_the_words_of_then(gateway: Gateway, conn: Connection) -> None:
    word, later = unique("then"), unique("now")
    record = await ingest(gateway, f"{word} first words", lane="plain")
    then = datetime.fromisoformat(str(record["updatedAt"]))
    updated = await gateway.data(UPDATE, {"id": record["id"], "content": f"{later} new words"})
    assert updated
    retired = await ingest(gateway, f"{word} soon gone", lane="plain")
    gone = datetime.fromisoformat(str(retired["updatedAt"]))
    await gateway.data(RETIRE_RECORD, {"id": retired["id"], "reason": "gone"})

    assert ids(await find(conn, word, ["plain"], as_of=then)) == [record["id"]]
    assert ids(await find(conn, word, ["plain"])) == []
    assert ids(await find(conn, later, ["plain"])) == [record["id"]]
    assert ids(await find(conn, later, ["plain"], as_of=then)) == []
    # The retired record is found as of a time it was live, not now.
    assert set(ids(await find(conn, word, ["plain"], as_of=gone))) == {retired["id"]}


async def test_an_empty_page_says_what_to_try(gateway: Gateway, conn: Connection) -> None:
    unknown = unique("nowhere")
    found = await find(conn, f"where is {unknown}?", ["notes"])
    assert found.items == [] and found.hint is not None and unknown.lower() in found.hint
    stop = await find(conn, "what is it?", ["notes"])
    assert stop.terms == () and stop.hint is not None and "too common" in stop.hint


async def test_past_the_budget_the_newest_holders_of_the_rarest_word_are_ranked(
    gateway: Gateway, conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    word, rarer = unique("budget"), unique("rarer")
    written = [await ingest(gateway, f"{word} {rarer} n{n}", lane="plain") for n in range(3)]
    await ingest(gateway, f"{word} only", lane="plain")
    monkeypatch.setattr(planner, "COUNT_BUDGET", 2)
    from store.kinds.record.search.statement import search_statement

    search_statement.cache_clear()
    try:
        found = await find(conn, f"{word} {rarer}", ["plain"])
    finally:
        search_statement.cache_clear()
    # The rarest word is held by three records, past a budget of two: its two newest.
    assert (found.total_count, found.total_exact) == (2, False)
    assert set(ids(found)) == {written[1]["id"], written[2]["id"]}


async def test_the_statistics_are_verified_and_follow_retirements(
    gateway: Gateway, conn: Connection
) -> None:
    word = unique("counted")
    kept = await ingest(gateway, f"{word} kept", lane="plain")
    gone = await ingest(gateway, f"{word} gone", lane="plain")
    await gateway.data(RETIRE_RECORD, {"id": gone["id"], "reason": "gone"})
    holding = await conn.fetchval(
        "SELECT sum(records) FROM (SELECT records FROM word_counts WHERE lexeme = $1 "
        "UNION ALL SELECT records FROM word_deltas WHERE lexeme = $1) c",
        word.lower(),
    )
    assert holding == 1 and kept
    report = await verify(gateway.database_url)
    assert not [p for p in report.problems if "search statistics" in p]
    # A count gone wrong is reported.
    await conn.execute(
        "INSERT INTO word_deltas (lane, lexeme, records, lexemes) VALUES ('plain', $1, 1, 7)",
        word.lower(),
    )
    report = await verify(gateway.database_url)
    assert [p for p in report.problems if "search statistics" in p and word.lower() in p]
    await conn.execute("DELETE FROM word_deltas WHERE lexeme = $1 AND lexemes = 7", word.lower())


async def test_a_small_match_makes_every_word_read_its_candidates(
    gateway: Gateway, conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Words common in the lane but for the match: with a budget of 2, `common` alone is
    # too common to read candidates by, yet the scene's record holding only it is found.
    scene, common, rare = f"scene:{unique('s')}", unique("common"), unique("rare")
    for n in range(4):
        await ingest(gateway, f"{common} elsewhere {n}", lane="plain")
    evidence = await ingest(gateway, f"{common} in the scene", [scene], lane="plain")
    other = await ingest(gateway, f"{rare} in the scene", [scene], lane="plain")
    monkeypatch.setattr(planner, "COUNT_BUDGET", 2)
    from store.kinds.record.search.statement import search_statement

    search_statement.cache_clear()
    try:
        found = await find(conn, f"{common} {rare}", ["plain"], match=[scene])
        pooled = await find(conn, f"{common} {rare}", ["plain"])
    finally:
        search_statement.cache_clear()
    assert set(ids(found)) == {evidence["id"], other["id"]} and found.total_exact
    # Without the match, the common word only scores what the rare one found.
    assert ids(pooled) == [other["id"]] and not pooled.total_exact


async def test_a_note_is_one_hit(gateway: Gateway, conn: Connection) -> None:
    from tests.intake.test_intake_folder import INTAKE

    word = unique("note")
    files = [
        {
            "path": f"{word}.md",
            "content": f"# {word} renewal\n\nSarah keeps the {word} renewal on track.\n",
            "modifiedAt": "2026-12-01T00:00:00+00:00",
        }
    ]
    variables = {"lane": "notes", "files": files, "folder": unique("f")}
    await gateway.data(INTAKE, variables)
    found = await find(conn, f"who keeps the {word} renewal?", ["notes"])
    # The note's text is its part's; the note's own record (intake's JSON, which copies
    # its headings) is not found by it.
    [hit] = found.items
    record = await conn.fetchrow("SELECT content, properties FROM records WHERE id = $1", hit.id)
    assert "Sarah keeps" in record["content"]
    report = await verify(gateway.database_url)
    assert report.ok, report.problems
