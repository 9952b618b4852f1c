"""A small LangGraph agent graph whose long-term memory is EdgeloomStore: what it learns
in one thread it recalls in another, by edgeloom's search, and the memory is a record in
the gateway's ledger."""

from __future__ import annotations

from typing import TypedDict

from edgeloom_client import Edgeloom
from edgeloom_client.langgraph import EdgeloomStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from tests.clients.conftest import Served


class Turn(TypedDict, total=False):
    user: str
    said: str
    answer: str


def agent(state: Turn, *, store: BaseStore) -> Turn:
    """Remembers what it is told ("remember: ..."), and answers a question with what it
    recalls of it; a deterministic stand-in for a model's turn."""
    namespace = ("memories", state["user"])
    said = state["said"]
    if said.startswith("remember: "):
        fact = said.removeprefix("remember: ")
        store.put(namespace, f"fact-{len(store.search(namespace)) + 1}", {"fact": fact})
        return {"answer": "noted"}
    word = said.rstrip("?").split()[-1]
    recalled = store.search(namespace, query=word, limit=1)
    return {"answer": recalled[0].value["fact"] if recalled else "I do not know"}


def test_a_graph_remembers_across_two_threads(served: Served) -> None:
    builder = StateGraph(Turn)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    store = EdgeloomStore(served.url)
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)

    def turn(thread: str, said: str) -> str:
        config = {"configurable": {"thread_id": thread}}
        answer: str = graph.invoke({"user": "ada", "said": said}, config)["answer"]
        return answer

    assert turn("monday", "what do I drink with breakfast?") == "I do not know"
    assert turn("monday", "remember: Ada drinks rooibos with breakfast") == "noted"
    # Another thread: nothing of Monday's conversation, only the store.
    assert turn("tuesday", "what does Ada drink, rooibos?") == ("Ada drinks rooibos with breakfast")
    assert turn("tuesday", "and who is she, bob?") == "I do not know"
    with Edgeloom(served.url) as client:
        page = client.gather(['lg_ns:["memories","ada"]']).gather
        assert [record.created_by for record in page.items] == ["dev"]
    store.close()
