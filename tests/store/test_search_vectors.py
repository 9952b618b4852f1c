"""Search by vector and hybrid search: ranking, the vector's size and model, time, lanes,
the exact and the index walk, the count budget, and verify.

Where the server has no pgvector (the system PostgreSQL here) a search by vector is
refused with the reason, and the vectors are kept all the same.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from asyncpg import Connection

from policies.errors import EmbeddingError, VectorSizeError
from policies.model import Embedding
from store.errors import InvalidInputError
from store.kinds.record.queries import GatherMode
from store.kinds.record.search import bm25, fusion, planner, vector_hits
from store.kinds.record.search.arguments import SearchArgs, VectorScope
from store.kinds.record.search.find import Hit, Hits, search
from store.kinds.record.search.statement import search_statement
from store.kinds.record.search.terms import Syntax
from store.kinds.record.vectors import availability
from store.operations.verify import verify
from tests.conftest import GatewayFactory
from tests.gql._api import ADD, INGEST, INGEST_MANY, RETIRE_RECORD, UPDATE, ingest, unique
from tests.gql._asserted import CONNECT
from tests.support import Gateway, GraphQLFailure, sql

POLICY = """
lanes:
  notes: { embedding: { dimensions: 4, model: m4 } }
  secret: { embedding: { dimensions: 4, model: m4 } }
  other: { embedding: { dimensions: 4, model: x4 } }
  plain: {}
agents:
  dev: { read: ["*"], write: ["*"] }
"""
SCOPE = {
    "notes": Embedding(4, "m4"),
    "secret": Embedding(4, "m4"),
    "other": Embedding(4, "x4"),
}
MINE = ["notes", "secret"]
UPDATE_VECTOR = """
mutation($id: ID!, $embedding: [Float!]) { update(id: $id, embedding: $embedding) { updatedAt } }
"""


@pytest.fixture(scope="module")
async def gateway(start_gateway: GatewayFactory) -> Gateway:
    return await start_gateway(policy_yaml=POLICY, anonymous_agent="dev")


@pytest.fixture
async def conn(gateway: Gateway) -> AsyncIterator[Connection]:
    async with sql(gateway.database_url) as connection:
        yield connection


@pytest.fixture
async def off(conn: Connection) -> str | None:
    return await availability(conn)


@pytest.fixture
def on(off: str | None) -> None:
    if off is not None:
        pytest.skip("the server has no pgvector: tested by the refusal test")


async def find(
    conn: Connection,
    vector: list[float] | None,
    text: str | None = None,
    lanes: list[str] | None = None,
    **kw: Any,
) -> Hits:
    first = kw.pop("first", None)
    given: dict[str, Any] = {"match": None, "mode": GatherMode.INTERSECT, "source_types": None}
    given |= {"as_of": None, "after": None, **kw}
    scope = VectorScope(SCOPE, await availability(conn))
    args = SearchArgs(text, lanes=lanes or MINE, vector=vector, scope=scope, **given)
    return await search(conn, args, first)


def ids(page: Hits) -> list[str]:
    return [h.id for h in page.items]


@pytest.fixture
def walk_always() -> Iterator[None]:
    """Every filtered search walks the index (no filter counts as small)."""
    was = planner.EXACT_SCAN_MAX
    planner.EXACT_SCAN_MAX = -1
    search_statement.cache_clear()
    yield
    planner.EXACT_SCAN_MAX = was
    search_statement.cache_clear()


async def corpus(gateway: Gateway, tag: str) -> list[str]:
    vectors = [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0], [-1, 0, 0, 0]]
    return [
        (await ingest(gateway, f"v {n}", [tag], lane="notes", embedding=v))["id"]
        for n, v in enumerate(vectors)
    ]


def check_ranked(page: Hits, written: list[str]) -> None:
    assert ids(page) == written
    assert [h.vector_rank for h in page.items] == [1, 2, 3, 4]
    assert [h.text_rank for h in page.items] == [None] * 4
    assert [round(h.score, 4) for h in page.items] == [1.0, round(math.sqrt(0.5), 4), 0.0, -1.0]
    assert all(h.highlights == () for h in page.items)
    assert page.total_count == 4 and page.total_exact


async def test_vectors_rank_by_cosine_similarity(
    gateway: Gateway, conn: Connection, on: None
) -> None:
    tag = f"t:{unique()}"
    written = await corpus(gateway, tag)
    check_ranked(await find(conn, [2, 0, 0, 0], match=[tag]), written)
    # Paged: the second page goes on where the first ended.
    first = await find(conn, [2, 0, 0, 0], match=[tag], first=3)
    rest = await find(conn, [2, 0, 0, 0], match=[tag], first=3, after=first.end_cursor)
    assert ids(first) + ids(rest) == written and first.has_next_page
    assert [h.vector_rank for h in rest.items] == [4]


async def test_a_filtered_walk_of_the_index_finds_what_the_exact_scan_does(
    gateway: Gateway, conn: Connection, on: None, walk_always: None
) -> None:
    tag = f"t:{unique()}"
    written = await corpus(gateway, tag)
    check_ranked(await find(conn, [2, 0, 0, 0], match=[tag]), written)


async def test_a_vector_of_another_size_or_model_is_refused(
    gateway: Gateway, conn: Connection, on: None
) -> None:
    with pytest.raises(VectorSizeError, match="notes: 4 dimensions, model 'm4'"):
        await find(conn, [1, 0, 0])
    with pytest.raises(VectorSizeError, match="different models"):
        await find(conn, [1, 0, 0, 0], lanes=["notes", "other"])
    with pytest.raises(VectorSizeError, match="declares an embedding"):
        await find(conn, [1, 0, 0, 0], lanes=["plain"])
    for bad in (math.nan, math.inf):
        with pytest.raises(InvalidInputError, match="finite"):
            await find(conn, [bad, 0, 0, 0])
    with pytest.raises(InvalidInputError, match="all zeros"):
        await find(conn, [0, 0, 0, 0])
    with pytest.raises(InvalidInputError, match="text, vector or both"):
        await find(conn, None)


async def test_a_write_of_a_vector_of_another_size_is_refused(gateway: Gateway) -> None:
    # On every server: the policy decides, whatever indexes the vectors.
    for lane, size, expected in (
        ("notes", 3, "4 dimensions made by model 'm4'"),
        ("plain", 4, "declares no embedding"),
    ):
        with pytest.raises(GraphQLFailure) as refused:
            await ingest(gateway, "x", lane=lane, embedding=[1.0] * size)
        error = refused.value.args[0][0]
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert expected in error["message"]
    assert isinstance(EmbeddingError("notes", 3, 4, "m4"), EmbeddingError)


async def bound(conn: Connection, text: str) -> float:
    """The most a record could score by BM25 for `text` in the caller's lanes: each
    term's idf * (K1 + 1), read from the search's own plan."""
    plan = await planner.plan(conn, MINE, text, Syntax.NATURAL)  # type: ignore[arg-type]
    (lane,) = {(x.idfs, x.phrase_idfs) for x in plan.lanes}
    return (bm25.K1 + 1) * sum(lane[0] + lane[1])


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


async def test_hybrid_fuses_the_two_scores_over_their_ranges(
    gateway: Gateway, conn: Connection, on: None
) -> None:
    tag, word = f"t:{unique()}", unique("h")
    query = [1, 0.1, 0, 0]
    both = await ingest(
        gateway, f"{word} {word} renewal", [tag], lane="notes", embedding=[0, 1, 0, 0]
    )
    words_only = await ingest(gateway, f"{word} risk", [tag], lane="notes")
    vector_only = await ingest(gateway, "unrelated", [tag], lane="notes", embedding=[1, 0, 0, 0])
    page = await find(conn, query, text=word, match=[tag])
    by_id = {h.id: h for h in page.items}
    assert set(by_id) == {both["id"], words_only["id"], vector_only["id"]}
    assert page.total_count == 3

    # Each list alone, under the same filters, gives the scores the fusion combines.
    text = {h.id: h.score for h in (await find(conn, None, text=word, match=[tag])).items}
    near = {h.id: h.score for h in (await find(conn, query, match=[tag])).items}
    most = await bound(conn, word)
    assert 0 < max(text.values()) < most

    def fused(h: Hit) -> float:
        # The text over its bound, the similarity placed in [0, 1]; no vector adds 0.
        weight = fusion.TEXT_WEIGHT
        similarity = (1 + near[h.id]) / 2 if h.id in near else 0.0
        return weight * text.get(h.id, 0.0) / most + (1 - weight) * similarity

    assert (by_id[both["id"]].text_rank, by_id[both["id"]].vector_rank) == (1, 2)
    assert (by_id[words_only["id"]].text_rank, by_id[words_only["id"]].vector_rank) == (2, None)
    assert (by_id[vector_only["id"]].text_rank, by_id[vector_only["id"]].vector_rank) == (None, 1)
    for h in page.items:
        assert h.score == pytest.approx(fused(h))
    assert ids(page)[0] == both["id"]
    assert [x.text for x in by_id[both["id"]].highlights] == [word, word]
    assert by_id[vector_only["id"]].highlights == ()


async def test_strict_hybrid_places_the_text_over_its_best(
    gateway: Gateway, conn: Connection, on: None
) -> None:
    # ts_rank_cd has no bound of its own: the best text hit stands for it.
    tag, word = f"t:{unique()}", unique("x")
    query = [1, 0, 0, 0]
    written = [
        await ingest(gateway, f"{word} {word} one", [tag], lane="notes", embedding=[0, 1, 0, 0]),
        await ingest(gateway, f"{word} two", [tag], lane="notes", embedding=[1, 1, 0, 0]),
    ]
    strict = Syntax.STRICT
    page = await find(conn, query, text=word, match=[tag], syntax=strict)
    text = {
        h.id: h.score for h in (await find(conn, None, text=word, match=[tag], syntax=strict)).items
    }
    best, weight = max(text.values()), fusion.TEXT_WEIGHT
    vectors = {written[0]["id"]: [0, 1, 0, 0], written[1]["id"]: [1, 1, 0, 0]}
    for h in page.items:
        near = (1 + cosine(query, vectors[h.id])) / 2
        assert h.score == pytest.approx(weight * text[h.id] / best + (1 - weight) * near, rel=1e-5)
    assert set(ids(page)) == {r["id"] for r in written}


@pytest.fixture
def one_nearest() -> Iterator[None]:
    """The vector list holds the nearest record alone."""
    was = vector_hits.VECTOR_DEPTH
    vector_hits.VECTOR_DEPTH = 1
    search_statement.cache_clear()
    yield
    vector_hits.VECTOR_DEPTH = was
    search_statement.cache_clear()


async def test_a_text_hit_past_the_vector_list_keeps_its_similarity(
    gateway: Gateway, conn: Connection, on: None, one_nearest: None
) -> None:
    # Two records equal by their words: the one whose vector is nearer the query ranks
    # first, though neither is in the vector list (a third, with no word, is its nearest).
    tag, word = f"t:{unique()}", unique("s")
    query = [1, 0, 0, 0]
    far = await ingest(gateway, f"{word} note", [tag], lane="notes", embedding=[-1, 1, 0, 0])
    close = await ingest(gateway, f"{word} memo", [tag], lane="notes", embedding=[1, 1, 0, 0])
    nearest = await ingest(gateway, "elsewhere", [tag], lane="notes", embedding=[1, 0, 0, 0])
    page = await find(conn, query, text=word, match=[tag])
    by_id = {h.id: h for h in page.items}
    assert ids(page)[0] == close["id"] and set(by_id) == {close["id"], far["id"], nearest["id"]}
    assert [by_id[r["id"]].vector_rank for r in (close, far, nearest)] == [None, None, 1]
    text = {h.id: h.score for h in (await find(conn, None, text=word, match=[tag])).items}
    assert text[far["id"]] == pytest.approx(text[close["id"]])
    weight, most = fusion.TEXT_WEIGHT, await bound(conn, word)
    for record, vector in ((close, [1, 1, 0, 0]), (far, [-1, 1, 0, 0])):
        similarity = (1 + cosine(query, vector)) / 2
        expected = weight * text[record["id"]] / most + (1 - weight) * similarity
        assert by_id[record["id"]].score == pytest.approx(expected)


async def test_hybrid_ranks_evidence_at_least_as_well_as_either_list(
    gateway: Gateway, conn: Connection, on: None
) -> None:
    """Each list alone puts a decoy first: the text a record that repeats the words but
    is about something else (its vector opposite), the vectors a record near the question
    that holds none of its words. The evidence is second in both, and first fused."""
    tag, rare, common = f"t:{unique()}", unique("acme"), unique("renewal")
    query = [1, 0, 0, 0]
    for n in range(6):  # the common word, with nothing near the question
        await ingest(gateway, f"{common} filler {n}", [tag], lane="notes", embedding=[0, 0, 1, 0])
    evidence = await ingest(
        gateway, f"{rare} {common} is due", [tag], lane="notes", embedding=[1, 0.3, 0, 0]
    )
    words_decoy = await ingest(
        gateway, f"{rare} {rare} {rare} {common}", [tag], lane="notes", embedding=[-1, 0, 0, 0]
    )
    vector_decoy = await ingest(gateway, "nothing alike", [tag], lane="notes", embedding=query)
    text = f"{rare} {common}"
    by_text = ids(await find(conn, None, text=text, match=[tag]))
    by_vector = ids(await find(conn, query, match=[tag]))
    fused = ids(await find(conn, query, text=text, match=[tag]))
    assert by_text[:2] == [words_decoy["id"], evidence["id"]]
    assert by_vector[:2] == [vector_decoy["id"], evidence["id"]]
    for ranked in (by_text, by_vector):
        assert fused.index(evidence["id"]) <= ranked.index(evidence["id"])
    assert fused[0] == evidence["id"]


async def test_as_of_reads_the_vector_of_then(gateway: Gateway, conn: Connection, on: None) -> None:
    tag = f"t:{unique()}"
    record = await ingest(gateway, "first", [tag], lane="notes", embedding=[1, 0, 0, 0])
    other = await ingest(gateway, "second", [tag], lane="notes", embedding=[0, 0, 1, 0])
    before_update = datetime.fromisoformat(record["updatedAt"])
    updated = (await gateway.data(UPDATE_VECTOR, {"id": record["id"], "embedding": [0, 1, 0, 0]}))[
        "update"
    ]
    before_retire = datetime.fromisoformat(updated["updatedAt"])
    await gateway.data(RETIRE_RECORD, {"id": record["id"], "reason": "gone"})

    then = await find(conn, [1, 0, 0, 0], match=[tag], as_of=before_update)
    assert ids(then)[0] == record["id"] and then.items[0].score == pytest.approx(1.0)
    later = await find(conn, [0, 1, 0, 0], match=[tag], as_of=before_retire)
    assert ids(later)[0] == record["id"] and later.items[0].score == pytest.approx(1.0)
    # Retired now: absent from every current search.
    assert ids(await find(conn, [0, 1, 0, 0], match=[tag])) == [other["id"]]

    # New content without a new vector drops the old content's.
    await gateway.data(UPDATE, {"id": other["id"], "content": "rewritten"})
    assert ids(await find(conn, [0, 0, 1, 0], match=[tag])) == []


async def test_a_lane_not_read_contributes_nothing(
    gateway: Gateway, conn: Connection, on: None
) -> None:
    tag = f"t:{unique()}"
    mine = await ingest(gateway, "mine", [tag], lane="notes", embedding=[0, 1, 1, 0])
    hidden = await ingest(gateway, "hidden", [tag], lane="secret", embedding=[0, 0, 1, 0])
    page = await find(conn, [0, 0, 1, 0], match=[tag], lanes=["notes"])
    assert ids(page) == [mine["id"]] and page.total_count == 1
    assert page.items[0].vector_rank == 1
    # Without match too: the nearest of all is not in the list, nor counted.
    every = await find(conn, [0, 0, 1, 0], lanes=["notes"], first=100)
    assert mine["id"] in ids(every) and hidden["id"] not in ids(every)
    assert every.total_count == len(every.items)
    hybrid = await find(conn, [0, 0, 1, 0], text="hidden", lanes=["notes"], first=100)
    assert hidden["id"] not in ids(hybrid)
    assert (await find(conn, [0, 0, 1, 0], match=[tag])).total_count == 2


async def test_past_the_budget_the_count_is_a_lower_bound(
    gateway: Gateway, conn: Connection
) -> None:
    word = unique("b")
    for _ in range(3):
        await ingest(gateway, word, lane="notes")
    was = planner.COUNT_BUDGET
    planner.COUNT_BUDGET = 2
    search_statement.cache_clear()
    try:
        page = await find(conn, None, text=word)
    finally:
        planner.COUNT_BUDGET = was
        search_statement.cache_clear()
    # Past the budget, the budget's newest matches are the ones ranked.
    assert (page.total_count, page.total_exact, len(page.items)) == (2, False, 2)
    exact = await find(conn, None, text=word)
    assert (exact.total_count, exact.total_exact) == (3, True)


async def test_past_the_budget_hybrid_fuses_the_newest_matches(
    gateway: Gateway, conn: Connection, on: None
) -> None:
    tag, word = f"t:{unique()}", unique("n")
    written = [
        await ingest(gateway, f"{word} " * (4 - n), [tag], lane="notes", embedding=[1, n, 0, 0])
        for n in range(2)
    ]
    written += [await ingest(gateway, f"{word} " * (2 - n), [tag], lane="notes") for n in range(2)]
    was = planner.COUNT_BUDGET
    planner.COUNT_BUDGET = 1
    search_statement.cache_clear()
    try:
        page = await find(conn, [1, 0, 0, 0], text=word, match=[tag])
    finally:
        planner.COUNT_BUDGET = was
        search_statement.cache_clear()
    # Three hits fused, counted past the budget by the text's four matches, of which the
    # newest alone is ranked: the best match, the oldest, is in the vector list only.
    assert (page.total_count, page.total_exact) == (1, False)
    by_id = {h.id: h for h in page.items}
    assert set(by_id) == {written[0]["id"], written[1]["id"], written[3]["id"]}
    assert [by_id[r["id"]].text_rank for r in (written[0], written[1], written[3])] == [
        None,
        None,
        1,
    ]
    assert [by_id[r["id"]].vector_rank for r in written[:2]] == [1, 2]


async def test_vector_search_is_refused_with_the_reason_where_off(
    gateway: Gateway, conn: Connection, off: str | None
) -> None:
    if off is None:
        pytest.skip("the server has pgvector")
    assert "no pgvector" in off
    with pytest.raises(InvalidInputError, match="vector search is off"):
        await find(conn, [1, 0, 0, 0])
    # Text search works, and the vector is kept with its record.
    record = await ingest(gateway, unique("k"), lane="notes", embedding=[0.5, 0, 0, 0])
    assert ids(await find(conn, None, text=record["content"])) == [record["id"]]
    stored = await conn.fetchval(
        "SELECT state->'embedding' FROM ledger WHERE kind = 'record' AND object_id = $1",
        record["id"],
    )
    assert stored == '["0.5", "0", "0", "0"]'


async def test_verify_rebuilds_the_vectors_and_reports_a_difference(
    gateway: Gateway, conn: Connection
) -> None:
    record = await ingest(gateway, unique("v"), lane="notes", embedding=[0.1, 0.2, 0.3, 0.4])
    report = await verify(gateway.database_url)
    assert report.ok, report.problems
    column = await conn.fetchval(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'record_vectors'::regclass AND attname = 'embedding'"
    )
    changed = "'[9,9,9,9]'" if column == "vector" else "'{9,9,9,9}'"
    await conn.execute(
        f"UPDATE record_vectors SET embedding = {changed} WHERE record_id = $1", record["id"]
    )
    try:
        report = await verify(gateway.database_url)
        assert f"{record['id']}: vector of version 1 differs from its entry" in report.problems
    finally:
        await conn.execute(
            "UPDATE record_vectors SET embedding = "
            + ("'[0.1,0.2,0.3,0.4]'" if column == "vector" else "'{0.1,0.2,0.3,0.4}'")
            + " WHERE record_id = $1",
            record["id"],
        )
    assert (await verify(gateway.database_url)).ok


async def test_a_change_of_properties_or_a_connection_keeps_the_vector(
    gateway: Gateway, conn: Connection, on: None
) -> None:
    tag = f"t:{unique()}"
    a = await ingest(gateway, "a", [tag], lane="notes", embedding=[0, 0, 0, 1])
    b = await ingest(gateway, "b", [tag], lane="notes", embedding=[0, 0, 1, 1])
    await gateway.data(ADD, {"id": a["id"], "properties": ["extra:x"]})
    await gateway.data(CONNECT, {"a": a["id"], "b": b["id"], "hint": "pair"})
    page = await find(conn, [0, 0, 0, 1], match=[tag])
    assert ids(page) == [a["id"], b["id"]]
    assert page.items[0].score == pytest.approx(1.0)


# Lengths whose square passes float32 (pgvector sums squares and products in float32), or
# falls below its normal numbers: each made every search of its lane NaN or 0.
OUT_OF_RANGE = ([3e38, 3e38, 3e38, 3e38], [1e20] * 4, [1e-45, 0, 0, 0], [1e-20, 0, 0, 0])
LENGTH = "between 1e-18 and 1e19"


async def test_a_vector_whose_length_passes_float32_is_refused_at_every_write(
    gateway: Gateway,
) -> None:
    # On every server: what pgvector cannot compare is not written, indexed or not.
    record = await ingest(gateway, unique("w"), lane="notes", embedding=[1, 0, 0, 0])
    for bad in OUT_OF_RANGE:
        refusals = [
            await gateway.error(
                INGEST, {"input": {"content": "x", "lane": "notes", "embedding": bad}}
            ),
            await gateway.error(UPDATE_VECTOR, {"id": record["id"], "embedding": bad}),
            await gateway.error(
                INGEST_MANY,
                {
                    "inputs": [
                        {"content": "ok", "lane": "notes"},
                        {"content": "x", "lane": "notes", "embedding": bad},
                    ]
                },
            ),
        ]
        for error in refusals:
            assert error["extensions"]["code"] == "BAD_USER_INPUT", error
            assert LENGTH in error["message"], error["message"]
            assert error["extensions"]["allowed"] == "1e-18..1e19"
    # The edges of the range are taken.
    for fine in ([4e18] * 4, [2e-18, 0, 0, 0]):
        await ingest(gateway, unique("w"), lane="notes", embedding=fine)


async def test_a_search_vector_whose_length_passes_float32_is_refused(
    conn: Connection, on: None
) -> None:
    for bad in OUT_OF_RANGE:
        with pytest.raises(InvalidInputError, match=LENGTH):
            await find(conn, bad)


async def test_a_parallel_vector_scores_one_at_any_length_taken(
    gateway: Gateway, conn: Connection, on: None
) -> None:
    tag = f"t:{unique()}"
    large = await ingest(gateway, "large", [tag], lane="notes", embedding=[1e18] * 4)
    small = await ingest(gateway, "small", [tag], lane="notes", embedding=[1e-17, 0, 0, 0])
    for vector, nearest in (([1, 1, 1, 1], large), ([1e18] * 4, large), ([2, 0, 0, 0], small)):
        page = await find(conn, vector, match=[tag])
        assert ids(page)[0] == nearest["id"]
        assert page.items[0].score == pytest.approx(1.0)
    page = await find(conn, [3, 0, 0, 0], match=[tag])
    assert [round(h.score, 4) for h in page.items] == [1.0, 0.5]


async def test_a_stored_vector_with_no_cosine_distance_is_no_hit(
    gateway: Gateway, conn: Connection, on: None
) -> None:
    # A vector stored before its length was checked: its distance to anything is NaN,
    # which must neither reach a score nor hide the lane's other vectors.
    tag = f"t:{unique()}"
    bad = await ingest(gateway, "was huge", [tag], lane="notes", embedding=[1, 1, 1, 1])
    good = await ingest(gateway, "fine", [tag], lane="notes", embedding=[1, 1, 0, 0])
    await conn.execute(
        "UPDATE record_vectors SET embedding = '[3e38,3e38,3e38,3e38]' WHERE record_id = $1",
        bad["id"],
    )
    try:
        for kw in ({"match": [tag]}, {"first": 100}, {"text": "fine", "match": [tag]}):
            page = await find(conn, [1, 1, 1, 1], **kw)
            assert bad["id"] not in ids(page) and good["id"] in ids(page)
            assert all(math.isfinite(h.score) for h in page.items)
    finally:
        await conn.execute(
            "UPDATE record_vectors SET embedding = '[1,1,1,1]' WHERE record_id = $1", bad["id"]
        )


async def test_hybrid_as_of_compares_a_text_hit_with_its_vector_of_then(
    gateway: Gateway, conn: Connection, on: None, one_nearest: None
) -> None:
    tag, word = f"t:{unique()}", unique("o")
    query = [1, 0, 0, 0]
    record = await ingest(gateway, f"{word} memo", [tag], lane="notes", embedding=[1, 1, 0, 0])
    await ingest(gateway, "elsewhere", [tag], lane="notes", embedding=query)
    updated = await gateway.data(UPDATE_VECTOR, {"id": record["id"], "embedding": [-1, 0, 0, 0]})
    between = datetime.fromisoformat(updated["update"]["updatedAt"]) - timedelta(microseconds=1)
    text = {h.id: h.score for h in (await find(conn, None, text=word, match=[tag])).items}
    weight, most = fusion.TEXT_WEIGHT, await bound(conn, word)
    for at, vector in ((between, [1, 1, 0, 0]), (None, [-1, 0, 0, 0])):
        page = await find(conn, query, text=word, match=[tag], as_of=at)
        (hit,) = [h for h in page.items if h.id == record["id"]]
        assert hit.vector_rank is None  # past the one nearest: compared all the same
        similarity = (1 + cosine(query, vector)) / 2
        expected = weight * text[record["id"]] / most + (1 - weight) * similarity
        assert hit.score == pytest.approx(expected)


async def test_a_text_hit_past_the_compared_best_adds_no_similarity(
    gateway: Gateway, conn: Connection, on: None, one_nearest: None
) -> None:
    tag, word = f"t:{unique()}", unique("c")
    query = [1, 0, 0, 0]
    best = await ingest(gateway, f"{word} {word} memo", [tag], lane="notes", embedding=[1, 1, 0, 0])
    second = await ingest(gateway, f"{word} note", [tag], lane="notes", embedding=[1, 1, 0, 0])
    await ingest(gateway, "elsewhere", [tag], lane="notes", embedding=query)
    was = fusion.TEXT_COMPARED
    fusion.TEXT_COMPARED = 1
    search_statement.cache_clear()
    try:
        page = await find(conn, query, text=word, match=[tag])
    finally:
        fusion.TEXT_COMPARED = was
        search_statement.cache_clear()
    by_id = {h.id: h for h in page.items}
    assert (by_id[best["id"]].text_rank, by_id[second["id"]].text_rank) == (1, 2)
    text = {h.id: h.score for h in (await find(conn, None, text=word, match=[tag])).items}
    weight, most = fusion.TEXT_WEIGHT, await bound(conn, word)
    near = (1 + cosine(query, [1, 1, 0, 0])) / 2
    assert by_id[best["id"]].score == pytest.approx(
        weight * text[best["id"]] / most + (1 - weight) * near
    )
    assert by_id[second["id"]].score == pytest.approx(weight * text[second["id"]] / most)
