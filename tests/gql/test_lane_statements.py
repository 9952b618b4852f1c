"""Every statement the gateway runs for a single-lane request names its lane (docs/scale.md).

Sharded by lane (Citus, on paper), a request of an agent of one lane reaches one shard only
if each of its statements says which lane: in its text or among its arguments. The gateway's
read pool is heard connection by connection while each read and a write of such an agent
runs; a statement that touches no table holding a lane's rows (the policy head, tokens) is
routed to the reference tables and needs none.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import GatewayFactory
from tests.gql._policy_support import mint
from tests.support import Gateway

LANE = "solo"
POLICY = f"""
lanes:
  {LANE}: {{}}
  other: {{}}
agents:
  one: {{ read: [{LANE}], write: [{LANE}] }}
  both: {{ read: ["*"], write: ["*"] }}
"""
LANE_TABLES: tuple[str, ...] = importlib.import_module(
    "store.migrations.versions.0032_lane_policies"
).LANE_TABLES
TOUCHES = re.compile(r"\b(" + "|".join((*LANE_TABLES, "ledger")) + r")\b")
# Transaction control (the BEGIN carries the lanes' settings, store.reads.lane_floor).
CONTROL = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|RESET|SET|SELECT 1$)")

INGEST = """mutation($c: String!) { ingest(input: {content: $c, lane: "solo",
  properties: ["org:Acme", "topic:x"]}) { id } }"""
READS = {
    "record": "query($id: ID!) { record(id: $id) { id content properties } }",
    "records": "{ records(first: 5) { totalCount items { id } } }",
    "gather": '{ gather(match: ["org:Acme", "topic:x"]) { totalCount items { id } } }',
    "search": '{ search(text: "harbour", first: 5) { totalCount items { record { id } } } }',
    "traverse": "query($id: ID!) { traverse(from: $id, depth: 2) { items { record { id } } } }",
    "audit": "{ audit(first: 5) { items { id kind } } }",
    "edgeProperty": '{ edgeProperty(property: "org:Acme") { memberCount } }',
}


def names(value: Any, lane: str) -> bool:
    """Whether an argument holds `lane` (as itself, in a list, or in JSON text)."""
    if isinstance(value, str):
        return lane in value
    if isinstance(value, (list, tuple)):
        return any(names(v, lane) for v in value)
    if isinstance(value, dict):
        return any(names(v, lane) for v in value.values())
    return False


class Heard:
    def __init__(self) -> None:
        self.statements: list[tuple[str, tuple[Any, ...]]] = []

    def __call__(self, record: Any) -> None:
        self.statements.append((record.query, tuple(record.args or ())))

    def unnamed(self, lane: str) -> Iterator[str]:
        for text, args in self.statements:
            if CONTROL.match(text) or not TOUCHES.search(text):
                continue
            if lane not in text and not names(args, lane):
                yield text


@pytest.fixture(scope="module")
async def gateway(start_gateway: GatewayFactory) -> Gateway:
    return await start_gateway(policy_yaml=POLICY)


async def hear(gateway: Gateway) -> Heard:
    assert gateway.state is not None
    pool = gateway.state["services"].pool
    heard = Heard()
    held = [await pool.acquire() for _ in range(pool.get_max_size())]
    for conn in held:
        conn.add_query_logger(heard)
    for conn in held:
        await pool.release(conn)
    return heard


async def test_each_statement_of_a_single_lane_request_names_the_lane(gateway: Gateway) -> None:
    tokens = await mint(gateway, "one", "both")
    ids = []
    for n in range(3):
        written = await gateway.data(INGEST, {"c": f"harbour note {n}"}, tokens["one"])
        ids.append(written["ingest"]["id"])
    await gateway.data(
        'mutation { ingest(input: {content: "elsewhere", lane: "other", '
        'properties: ["org:Acme"]}) { id } }',
        {},
        tokens["both"],
    )
    heard = await hear(gateway)
    for name, document in READS.items():
        heard.statements.clear()
        variables = {"id": ids[0]} if "$id" in document else {}
        await gateway.data(document, variables, tokens["one"])
        assert heard.statements, name
        unnamed = list(heard.unnamed(LANE))
        assert not unnamed, (name, unnamed)
        # The lanes cost no round trip: a compiled read is its one statement, a snapshot's
        # setting rides on its BEGIN.
        first = heard.statements[0][0]
        if name == "record":
            assert len(heard.statements) == 1 and "set_config" in first, heard.statements
        if first.startswith("BEGIN"):
            assert f"set_config('edgeloom.read_lanes', '{LANE}', true)" in first, first
    heard.statements.clear()
    await gateway.data(INGEST, {"c": "harbour note written"}, tokens["one"])
    assert not list(heard.unnamed(LANE)), heard.statements
