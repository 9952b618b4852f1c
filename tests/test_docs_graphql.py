"""Every `graphql` block of the README and `docs/*.md` is true to the schema, and the blocks
a reader can paste run as printed.

Each block is parsed and each of its operations validated against the schema; then every
query and mutation runs, in page order, against a development gateway and must answer
without an error. A record id a block names (`sr_1a2b3c`) stands for a record the test
writes first, one per id and per block, and an id shown cut short (`e_connect:reports_to_0f1e...`)
for the id of that kind and hint an earlier operation of the block answered. A subscription
runs over a WebSocket after the test wrote a record on the edge properties it matches, and its
first message must be an event without an error. Not run here: the blocks of the README's
first session (`test_readme_session.py` runs them and compares the answers) and blocks marked
`graphql not-run` (an instant fixed in the past that the test cannot give a record).
A block marked `graphql illustrative` holds a placeholder a reader fills in (`files: [...]`,
`<a part of ...>`) and is neither parsed nor run."""

from __future__ import annotations

import re
from typing import Any

import pytest
from graphql import (
    DocumentNode,
    ListValueNode,
    OperationDefinitionNode,
    OperationType,
    StringValueNode,
    parse,
    validate,
)

from gql.api.schema import schema
from tests.docs_pages import ILLUSTRATIVE, Block, blocks, page_text
from tests.gql._feed import feed_client
from tests.support import Gateway

NOT_RUN = "not-run"
SESSION = ("README.md", "### Every mutation, with what it answers")
PLACEHOLDER = re.compile(r"\.\.\.|<[^>]+>")
RECORD_ID = re.compile(r"\bsr_[0-9a-f]{6,32}\b")
CUT_ID = re.compile(r"\b((?:e_\w+:\w+_|edge_|co_)[0-9a-f]*)\.\.\.")
FULL_ID = re.compile(r"^(e_\w+:\w+_|edge_|co_)[0-9a-f]{32}$")
GRAPHQL = blocks("graphql")


def operations(block: Block) -> list[OperationDefinitionNode]:
    document = parse(block.text)
    assert all(isinstance(d, OperationDefinitionNode) for d in document.definitions)
    return list(document.definitions)  # type: ignore[arg-type]


def in_session(block: Block) -> bool:
    text = page_text(block.page)
    start = text.find(f"\n{SESSION[1]}\n")
    end = text.find("\n## ", start + 1)
    return block.page == SESSION[0] and start < block.offset < (end if end > 0 else len(text))


def runs(block: Block) -> bool:
    return ILLUSTRATIVE not in block.marks and NOT_RUN not in block.marks and not in_session(block)


def subscribes(block: Block) -> bool:
    return any(op.operation == OperationType.SUBSCRIPTION for op in operations(block))


CHECKED = [b for b in GRAPHQL if ILLUSTRATIVE not in b.marks]
RUN = [b for b in CHECKED if runs(b) and not subscribes(b)]
SUBSCRIBE = [b for b in CHECKED if runs(b) and subscribes(b)]


def test_the_docs_show_graphql() -> None:
    """The pages show blocks, most of them checked, and the marks are the known ones."""
    assert len(CHECKED) > len(GRAPHQL) - len(CHECKED) > 0 and RUN and SUBSCRIBE
    for block in GRAPHQL:
        assert set(block.marks) <= {ILLUSTRATIVE, NOT_RUN}, block.name


@pytest.mark.parametrize("block", CHECKED, ids=[b.name for b in CHECKED])
def test_each_block_is_valid_against_the_schema(block: Block) -> None:
    for operation in operations(block):
        errors = validate(schema._schema, DocumentNode(definitions=(operation,)))
        assert not errors, (block.name, [e.message for e in errors])


@pytest.mark.parametrize(
    "block", [b for b in GRAPHQL if ILLUSTRATIVE in b.marks], ids=lambda b: b.name
)
def test_an_illustrative_block_shows_a_placeholder(block: Block) -> None:
    assert PLACEHOLDER.search(block.text), f"{block.name} has nothing to fill in: check it"


class Names:
    """The ids a block names, each with the real one it stands for in this run."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.real: dict[str, str] = {}
        self.answered: list[str] = []

    async def put_in(self, text: str) -> str:
        for shown in RECORD_ID.findall(text):
            if shown not in self.real:
                self.real[shown] = await self._record(shown)
        text = RECORD_ID.sub(lambda m: self.real[m[0]], text)
        return CUT_ID.sub(lambda m: self._answered(m[1]), text)

    def learn(self, answer: Any) -> None:
        if isinstance(answer, dict):
            for value in answer.values():
                self.learn(value)
        elif isinstance(answer, list):
            for value in answer:
                self.learn(value)
        elif isinstance(answer, str) and FULL_ID.match(answer):
            self.answered.append(answer)

    def _answered(self, cut: str) -> str:
        # The hex a page shows after the hint is made up: the kind and hint name the id.
        kind_and_hint = cut.rstrip("0123456789abcdef")
        found = [i for i in self.answered if i.startswith(kind_and_hint)]
        assert found, f"no earlier answer holds an id like {cut}..."
        return found[-1]

    async def _record(self, shown: str) -> str:
        data = await self.gateway.data(
            "mutation($c: String!) { ingest(input: {content: $c,"
            ' properties: ["org:Acme", "person:Sarah"]}) { id } }',
            {"c": f"The record the docs call {shown}."},
        )
        record_id: str = data["ingest"]["id"]
        return record_id


@pytest.mark.parametrize("block", RUN, ids=[b.name for b in RUN])
async def test_each_block_runs_as_printed(gateway: Gateway, block: Block) -> None:
    names = Names(gateway)
    for operation in operations(block):
        source = block.text[operation.loc.start : operation.loc.end]  # type: ignore[union-attr]
        body = await gateway.post(await names.put_in(source))
        assert not body.get("errors") and body.get("data"), (block.name, source, body)
        names.learn(body["data"])


def matched(operation: OperationDefinitionNode) -> list[str]:
    """The edge properties the operation's `match` arguments name."""
    found: list[str] = []
    for selection in operation.selection_set.selections:
        for argument in getattr(selection, "arguments", ()):
            if argument.name.value == "match" and isinstance(argument.value, ListValueNode):
                found += [v.value for v in argument.value.values if isinstance(v, StringValueNode)]
    return found


@pytest.mark.parametrize("block", SUBSCRIBE, ids=[b.name for b in SUBSCRIBE])
async def test_each_subscription_block_delivers(gateway: Gateway, block: Block) -> None:
    for number, operation in enumerate(operations(block)):
        await gateway.data(
            "mutation($c: String!, $p: [String!]) { ingest(input: {content: $c, properties: $p})"
            " { id } }",
            {"c": "A record for the docs' subscriptions.", "p": matched(operation) or ["org:Acme"]},
        )
        source = block.text[operation.loc.start : operation.loc.end]  # type: ignore[union-attr]
        async with feed_client(gateway) as client:
            await client.subscribe(str(number), source)
            message = await client.message(str(number))
            assert message["type"] == "next" and "errors" not in message["payload"], message
            await client.stop(str(number))
