"""Live events rendered once per group of subscribers, and sent as ordinary execution would.

Two gateways on one database: one renders each event once for every subscriber running
the same operation under the same rights (the default), the other executes it for each
subscriber on its own. Every message the first sends must equal, as JSON, the message the
second sends for the same operation and event.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest

from gql.api.resolvers import subscription
from gql.feed.hub import FeedOptions, Rendered
from store.feed.live import FeedEvent
from tests.conftest import DEV, GatewayFactory
from tests.gql._api import ADD, REMOVE, UPDATE, ingest, unique
from tests.gql._feed import FeedClient, feed_client, newest_cursor

VERSION = "number at event actor content properties lane sourceType authority policyVersion hash"
AFTER = f"after {{ {VERSION} }}"
OPERATIONS: list[tuple[str, dict[str, Any], str | None]] = [
    # what the feed bench asks for
    ("subscription { auditEvents { cursor payload } }", {}, None),
    ("subscription { auditEvents { id cursor kind recordId lane actor at payload } }", {}, None),
    (f"subscription {{ auditEvents {{ cursor kind before {{ {VERSION} }} {AFTER} }} }}", {}, None),
    # aliases, __typename, fragments, variables, a second operation named away
    (
        """
        fragment V on Version { number content properties }
        query Other { __typename }
        subscription Watch($kinds: [String!], $lanes: [String!]) {
          auditEvents(kinds: $kinds, lanes: $lanes) {
            __typename
            cursor: id
            position: cursor
            ... on AuditEvent { kind payload at }
            was: before { ...V }
            now: after { ...V hash }
          }
        }
        """,
        {"kinds": None, "lanes": ["default"]},
        "Watch",
    ),
    # resumed from different cursors (set per subscriber), the same once live
    (
        "subscription($after: String) { auditEvents(after: $after) { cursor after { content } } }",
        {},
        None,
    ),
]
RESUMED = len(OPERATIONS) - 1


async def subscribe(client: FeedClient, op: str, n: int, after: str | None = None) -> None:
    query, variables, name = OPERATIONS[n]
    if after is not None:
        variables = {**variables, "after": after}
    payload: dict[str, Any] = {"query": query, "variables": variables}
    if name is not None:
        payload["operationName"] = name
    client.queues.setdefault(op, asyncio.Queue())
    await client.ws.send(json.dumps({"id": op, "type": "subscribe", "payload": payload}))


async def messages(client: FeedClient, op: str, count: int) -> list[dict[str, Any]]:
    """The next `count` messages of `op` without their id (checked), then silence."""
    got = [await client.message(op) for _ in range(count)]
    assert all(m["type"] == "next" and m["id"] == op for m in got), got
    assert not any("errors" in m["payload"] for m in got), got
    await client.nothing(op, 0.3)
    return [{k: v for k, v in m.items() if k != "id"} for m in got]


def seq_of(message: dict[str, Any]) -> int:
    event = message["payload"]["data"]["auditEvents"]
    return int(event.get("position", event.get("cursor")))


async def test_shared_renderings_equal_ordinary_execution(
    start_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = await start_gateway(anonymous_agent=DEV)
    ordinary = await start_gateway(
        anonymous_agent=DEV,
        database_url=shared.database_url,
        feed=FeedOptions(share_renderings=False),
    )
    renders: dict[str, list[Rendered]] = defaultdict(list)
    render = subscription._render

    async def counted(
        schema: Any,
        outlet: Any,
        services: Any,
        agent: str,
        policy: Any,
        events: Sequence[FeedEvent],
    ) -> Rendered:
        result = await render(schema, outlet, services, agent, policy, events)
        renders[outlet.query].append(result)
        return result

    monkeypatch.setattr(subscription, "_render", counted)
    ops = range(len(OPERATIONS))
    subscribers = ("one", "two", "ref")
    async with (
        feed_client(shared) as one,
        feed_client(shared) as two,
        feed_client(ordinary) as ref,
    ):
        clients = {"one": one, "two": two, "ref": ref}
        newest = await newest_cursor(shared)
        resume_from = {"one": newest, "two": "0", "ref": newest}
        for n in ops:
            for who in subscribers:
                after = resume_from[who] if n == RESUMED else None
                await subscribe(clients[who], f"{who}-{n}", n, after)
        # Live subscriptions start when registered: once a probe has reached every one,
        # all are live. Then the probes are drained.
        waiting = {f"{who}-{n}": clients[who] for who in subscribers for n in ops}
        while waiting:
            await ingest(shared, "probe")
            await asyncio.sleep(0.3)
            waiting = {op: c for op, c in waiting.items() if c.queues[op].empty()}
        await asyncio.sleep(1.0)
        for who in subscribers:
            for n in ops:
                queue = clients[who].queues[f"{who}-{n}"]
                while not queue.empty():
                    assert queue.get_nowait()["type"] == "next"
        start = int(await newest_cursor(shared))
        topic = unique("topic:shared-")
        record = await ingest(shared, "first", [topic, "stage:draft"])
        await shared.data(UPDATE, {"id": record["id"], "content": "second"})
        # Several events in one read, and records that later events change again.
        others = await asyncio.gather(*(ingest(shared, f"other {k}", [topic]) for k in range(3)))
        await shared.data(ADD, {"id": record["id"], "properties": ["stage:review"]})
        await shared.data(REMOVE, {"id": others[0]["id"], "properties": [topic]})
        written = int(await newest_cursor(shared)) - start
        for n in ops:
            got = await messages(one, f"one-{n}", written)
            if n == 1:
                by_kind = got
            assert await messages(two, f"two-{n}", written) == got
            assert await messages(ref, f"ref-{n}", written) == got
            assert [seq_of(m) for m in got] == list(range(start + 1, start + written + 1))
            # Each event rendered once for the group of two, and everything they were
            # sent came from a rendering.
            query = OPERATIONS[n][0]
            rendered = [seq for r in renders[query] for seq in r]
            assert len(rendered) == len(set(rendered)), "an event was rendered twice"
            assert {seq_of(m) for m in got} <= {
                s for r in renders[query] for s, p in r.items() if p
            }
    # The live events went out from the hub itself, no subscriber task woken for them.
    assert shared.state["services"].feed.sent_directly >= 2 * written * len(ops) - written
    kinds = {m["payload"]["data"]["auditEvents"]["kind"] for m in by_kind}
    assert kinds == {"sr_ingested", "sr_updated", "property_added", "property_removed"}
