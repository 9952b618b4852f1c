"""One snapshot per operation: a page, its count and its nested reads agree under writes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.asyncio.client import connect

from tests.conftest import GatewayFactory
from tests.gql._api import ingest, unique
from tests.support import Gateway

WRITERS = 4
ROUNDS = 40

# Three statements on the ordinary path (the page with its count, the records, the
# member counts): all must see the same moment.
GATHER = """
query($match: [String!]!) {
  gather(match: $match, first: 300) {
    totalCount
    items { id edgeProperties { property memberCount } }
  }
}
"""


@pytest.fixture(scope="module")
async def gateway(start_gateway: GatewayFactory) -> Gateway:
    return await start_gateway(anonymous_agent="dev", compiled_path=False)


async def test_a_page_and_its_counts_agree_while_writers_add_members(gateway: Gateway) -> None:
    tag = f"topic:{unique('snap')}"
    stop = asyncio.Event()

    async def writer(n: int) -> int:
        written = 0
        while not stop.is_set() and written < 60:
            await ingest(gateway, f"writer {n} record {written}", [tag, f"writer:{n}"])
            written += 1
        return written

    writers = [asyncio.create_task(writer(n)) for n in range(WRITERS)]
    seen: set[int] = set()
    try:
        for _ in range(ROUNDS):
            data = await gateway.data(GATHER, {"match": [tag]})
            page = data["gather"]
            total = page["totalCount"]
            assert len(page["items"]) == total, page
            for item in page["items"]:
                [count] = [p["memberCount"] for p in item["edgeProperties"] if p["property"] == tag]
                assert count == total, (count, total)
            seen.add(total)
    finally:
        stop.set()
        written = sum(await asyncio.gather(*writers))
    assert written > 0
    # The reads ran while the writes landed, not only before or after them.
    assert len(seen) > 1, seen


async def test_operations_on_one_socket_do_not_share_their_reads(gateway: Gateway) -> None:
    tags = [f"org:{unique('ws')}" for _ in range(6)]
    for n, tag in enumerate(tags):
        for _ in range(n + 1):
            await ingest(gateway, "on a socket", [tag])
    expected = {tag: await gateway.data(GATHER, {"match": [tag]}) for tag in tags}
    async with connect(gateway.ws_url, subprotocols=["graphql-transport-ws"]) as ws:
        await ws.send(json.dumps({"type": "connection_init"}))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        ops = {f"{n}-{r}": tag for r in range(5) for n, tag in enumerate(tags)}
        # Every operation is in flight at once on the one socket.
        for op, tag in ops.items():
            payload = {"query": GATHER, "variables": {"match": [tag]}}
            await ws.send(json.dumps({"id": op, "type": "subscribe", "payload": payload}))
        results: dict[str, Any] = {}
        completed: set[str] = set()
        while len(completed) < len(ops):
            message = json.loads(await asyncio.wait_for(ws.recv(), 20))
            if message["type"] == "next":
                results[message["id"]] = message["payload"]
            elif message["type"] == "complete":
                completed.add(message["id"])
            else:
                raise AssertionError(message)
    for op, tag in ops.items():
        assert results[op] == {"data": expected[tag]}, op
