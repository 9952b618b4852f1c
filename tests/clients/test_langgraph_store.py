"""EdgeloomStore against the behaviours LangGraph's own store tests check for its stores
(docs/clients.md lists them, and those that do not apply), sync and async, on a real
gateway; then what edgeloom adds: a put is a new version of the same record."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from edgeloom_client import Edgeloom, EdgeloomError
from edgeloom_client.langgraph import EdgeloomStore, FilterError
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from tests.clients.conftest import Served, serve
from tests.support import Databases


@pytest.fixture
def store(served: Served) -> Iterator[EdgeloomStore]:
    store = EdgeloomStore(served.url)
    yield store
    store.close()


@pytest.fixture
async def astore(served: Served) -> AsyncIterator[EdgeloomStore]:
    store = EdgeloomStore(served.url)
    yield store
    await store.aclose()


@pytest.fixture
def root() -> str:
    """A namespace root of the test's own: tests share one gateway."""
    return f"t{uuid.uuid4().hex[:10]}"


def test_put_get_update_delete(store: EdgeloomStore, root: str) -> None:
    namespace = (root, "documents")
    store.put(namespace, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = store.get(namespace, "doc1")
    assert isinstance(item, Item)
    assert (item.namespace, item.key) == (namespace, "doc1")
    assert item.value == {"title": "Test Document", "content": "Hello, World!"}

    store.put(namespace, "doc1", {"title": "Updated Document"})
    updated = store.get(namespace, "doc1")
    assert updated is not None and updated.value == {"title": "Updated Document"}
    assert updated.updated_at > item.updated_at
    assert updated.created_at == item.created_at

    assert store.get((root, "other_documents"), "doc1") is None
    assert store.get(namespace, "doc2") is None
    store.delete(namespace, "doc1")
    assert store.get(namespace, "doc1") is None
    store.put(namespace, "doc1", {"title": "Again"})
    again = store.get(namespace, "doc1")
    assert again is not None and again.value == {"title": "Again"}
    assert again.created_at > item.created_at


async def test_async_put_get_update_delete(astore: EdgeloomStore, root: str) -> None:
    namespace = (root, "documents")
    await astore.aput(namespace, "doc1", {"n": 1})
    item = await astore.aget(namespace, "doc1")
    assert item is not None and item.value == {"n": 1}
    await astore.aput(namespace, "doc1", {"n": 2})
    updated = await astore.aget(namespace, "doc1")
    assert updated is not None and updated.value == {"n": 2}
    assert updated.updated_at > item.updated_at and updated.created_at == item.created_at
    await astore.adelete(namespace, "doc1")
    assert await astore.aget(namespace, "doc1") is None


def test_a_put_with_the_same_key_is_a_new_version_of_one_record(
    store: EdgeloomStore, served: Served, root: str
) -> None:
    store.put((root,), "k", {"colour": "red", "size": 3})
    store.put((root,), "k", {"colour": "blue"})
    with Edgeloom(served.url) as client:
        page = client.gather([f'lg_ns:["{root}"]']).gather
        assert page.total_count == 1
        record = page.items[0]
        assert record.version >= 2
        first = client.get_record(record.id, as_of=record.created_at).record
    assert first is not None and '"red"' in first.content
    # The field the value no longer has is no longer a filter's match.
    assert store.search((root,), filter={"size": 3}) == []
    assert [item.key for item in store.search((root,), filter={"colour": "blue"})] == ["k"]


def test_batch_answers_each_op_in_order(store: EdgeloomStore, root: str) -> None:
    store.put((root, "foo"), "key1", {"data": "value1"})
    results = store.batch(
        [
            GetOp((root, "foo"), "key1"),
            PutOp((root, "bar"), "key2", {"data": "value2"}),
            SearchOp((root,), filter={"data": "value1"}),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", (root,)),)),
            GetOp((root,), "key3"),
            PutOp((root, "foo"), "key1", None),
            GetOp((root, "foo"), "key1"),
            GetOp((root, "bar"), "key2"),
        ]
    )
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
    assert results[1] is None
    assert [item.key for item in results[2]] == ["key1"]  # type: ignore[union-attr]
    assert results[3] == [(root, "bar"), (root, "foo")]
    assert results[4] is None and results[5] is None and results[6] is None
    assert isinstance(results[7], Item) and results[7].value == {"data": "value2"}


async def test_abatch_answers_each_op_in_order(astore: EdgeloomStore, root: str) -> None:
    results = await astore.abatch(
        [
            PutOp((root,), "a", {"v": 1}),
            GetOp((root,), "a"),
            SearchOp((root,)),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", (root,)),)),
        ]
    )
    assert results[0] is None
    assert isinstance(results[1], Item) and results[1].value == {"v": 1}
    assert [item.key for item in results[2]] == ["a"]  # type: ignore[union-attr]
    assert results[3] == [(root,)]


def test_search_by_namespace_filter_limit_and_offset(store: EdgeloomStore, root: str) -> None:
    for namespace, key, value in [
        ((root, "docs"), "doc1", {"title": "First", "author": "Alice", "tags": ["a"]}),
        ((root, "docs"), "doc2", {"title": "Second", "author": "Bob", "tags": ["b"]}),
        ((root, "images"), "img1", {"title": "Image", "author": "Alice", "n": 1}),
    ]:
        store.put(namespace, key, value)
    assert len(store.search((root,))) == 3
    docs = store.search((root, "docs"))
    assert {item.key for item in docs} == {"doc1", "doc2"}
    assert all(item.namespace == (root, "docs") for item in docs)
    alice = store.search((root,), filter={"author": "Alice"})
    assert {item.key for item in alice} == {"doc1", "img1"}
    assert [i.key for i in store.search((root,), filter={"author": {"$eq": "Bob"}})] == ["doc2"]
    assert [i.key for i in store.search((root,), filter={"n": 1.0})] == ["img1"]
    assert [i.key for i in store.search((root,), filter={"author": "Alice", "n": 1})] == ["img1"]
    assert len(store.search((root,), limit=2)) == 2
    everything = [item.key for item in store.search((root,))]
    assert [item.key for item in store.search((root,), offset=2)] == everything[2:]
    assert [item.key for item in store.search((root,), limit=1, offset=1)] == everything[1:2]


def test_a_filter_other_than_equality_is_refused_naming_what_is_allowed(
    store: EdgeloomStore, root: str
) -> None:
    store.put((root,), "k", {"n": 3, "tags": ["a"]})
    with pytest.raises(FilterError, match=r"equality only, a value or \{\"\$eq\": value\}"):
        store.search((root,), filter={"n": {"$gt": 2}})
    with pytest.raises(FilterError, match="string, number, boolean or null"):
        store.search((root,), filter={"tags": ["a"]})


def test_a_namespace_prefix_stops_at_segment_boundaries(store: EdgeloomStore, root: str) -> None:
    for namespace in [(root,), (root, "child"), (root, "child", "deep"), (root + "bar",)]:
        store.put(namespace, "k", {"v": 1})
    for namespace in [(root, "user_1"), (root, "user_1", "c"), (root, "userX1"), (root, "a%b")]:
        store.put(namespace, "k", {"v": 1})

    def namespaces(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        return {item.namespace for item in store.search(prefix, limit=100)}

    assert namespaces((root, "child")) == {(root, "child"), (root, "child", "deep")}
    assert namespaces((root + "bar",)) == {(root + "bar",)}
    assert namespaces((root[:-1],)) == set()
    assert namespaces((root, "user_1")) == {(root, "user_1"), (root, "user_1", "c")}
    assert namespaces((root, "a%b")) == {(root, "a%b")}
    assert len(namespaces((root,))) == 7


def test_namespace_labels_are_kept_exactly(store: EdgeloomStore, root: str) -> None:
    store.put((root, "alice"), "k", {"v": 1})
    store.put((root, "alice\n"), "k", {"v": 2})
    store.put((root, " spaced "), "k ", {"text": "Это русский, これは日本語です"})
    assert store.get((root, "alice"), "k").value == {"v": 1}  # type: ignore[union-attr]
    assert store.get((root, "alice\n"), "k").value == {"v": 2}  # type: ignore[union-attr]
    spaced = store.get((root, " spaced "), "k ")
    assert spaced is not None and spaced.value == {"text": "Это русский, これは日本語です"}
    assert store.list_namespaces(prefix=(root, "alice")) == [(root, "alice")]
    assert store.list_namespaces(suffix=("alice",)) == [(root, "alice")]


def test_invalid_namespaces_are_refused(store: EdgeloomStore) -> None:
    for namespace in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "foo", {"foo": "bar"})


def test_ttl_is_refused(store: EdgeloomStore, root: str) -> None:
    with pytest.raises(NotImplementedError):
        store.put((root,), "k", {"v": 1}, ttl=5)


def test_list_namespaces(store: EdgeloomStore, root: str) -> None:
    for n, namespace in enumerate(
        [
            ("a", "b", "c"),
            ("a", "b", "d", "e"),
            ("a", "b", "d", "i"),
            ("a", "b", "f"),
            ("a", "c", "f"),
            ("b", "a", "f"),
            ("users", "123"),
            ("users", "456", "settings"),
        ]
    ):
        store.put((root, *namespace), f"id_{n}", {"data": n})

    def listed(**conditions: Any) -> list[tuple[str, ...]]:
        found = store.list_namespaces(**{"prefix": (root,), **conditions})
        return [namespace[1:] for namespace in found]

    assert listed(prefix=(root, "a", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert listed(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert listed(prefix=(root, "a"), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert listed(prefix=(root, "a", "b"), max_depth=4) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert listed(prefix=(root, "a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert listed(prefix=(root, "a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert listed(prefix=(root, "a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert listed(suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert listed(prefix=(root, "users", "*")) == [("users", "123"), ("users", "456", "settings")]
    assert listed(prefix=(root, "nonexistent")) == []
    assert listed(prefix=(root, "users", "123")) == [("users", "123")]
    store.delete((root, "users", "123"), "id_6")
    assert listed(prefix=(root, "users")) == [("users", "456", "settings")]


async def test_list_namespaces_pages_in_order(astore: EdgeloomStore, root: str) -> None:
    for n in range(12):
        await astore.aput((root, f"sub_{n:02d}"), "k", {"n": n})
    pages = [
        await astore.alist_namespaces(prefix=(root,), limit=5, offset=offset)
        for offset in (0, 5, 10)
    ]
    assert pages == [[(root, f"sub_{n:02d}") for n in range(s, min(s + 5, 12))] for s in (0, 5, 10)]


async def test_search_with_a_query_ranks_the_item_that_holds_the_word_first(
    astore: EdgeloomStore, root: str
) -> None:
    await astore.aput((root, "M"), "M", {"note": "the marmalade recipe"})
    for n in range(6):
        await astore.aput((root, "A"), f"A{n}", {"note": f"nothing here {n}"})
    results = await astore.asearch((root,), query="marmalade", limit=3)
    assert [item.key for item in results] == ["M"]
    assert results[0].score is not None and results[0].score > 0
    assert await astore.asearch((root, "A"), query="marmalade") == []
    russian = await astore.aput((root, "ru"), "r", {"text": "Это русский текст"})
    assert russian is None
    found = await astore.asearch((root,), query="русский")
    assert [item.key for item in found] == ["r"]


async def test_an_empty_prefix_searches_and_lists_everything(databases: Databases) -> None:
    async for served in serve(databases, anonymous_agent="dev"):
        store = EdgeloomStore(served.url)
        assert await store.alist_namespaces() == []
        for namespace in [("a",), ("b", "c"), ("d", "e", "f")]:
            await store.aput(namespace, "k", {"v": 1})
        found = {item.namespace for item in await store.asearch((), limit=100)}
        assert found == {("a",), ("b", "c"), ("d", "e", "f")}
        assert await store.alist_namespaces() == [("a",), ("b", "c"), ("d", "e", "f")]
        assert await store.alist_namespaces(max_depth=1) == [("a",), ("b",), ("d",)]
        await store.aclose()


async def test_a_store_with_a_token_writes_as_its_agent(served_crm: Served) -> None:
    from tests.clients.test_client import mint

    store = EdgeloomStore(served_crm.url, token=await mint(served_crm.database_url, "planner"))
    await store.aput(("notes",), "k", {"v": 1})
    assert (await store.aget(("notes",), "k")).value == {"v": 1}  # type: ignore[union-attr]
    refused = EdgeloomStore(served_crm.url, token="not-a-token")
    with pytest.raises(EdgeloomError) as error:
        await refused.aget(("notes",), "k")
    assert error.value.code == "UNAUTHENTICATED"
    crm = EdgeloomStore(served_crm.url, lane="crm", aclient=store.aclient)
    with pytest.raises(EdgeloomError) as error:
        await crm.aput(("deals",), "k", {"v": 1})
    assert error.value.code == "FORBIDDEN"
    await store.aclose()
    await refused.aclose()
