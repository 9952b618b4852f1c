"""Live events of a plain selection rendered from the event's values, byte for byte as
strawberry's execution of the operation renders them (`gql.api.compiled_events`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from gql.api.compiled_events import plain_selection
from gql.api.resolvers import subscription
from gql.api.schema import schema
from gql.feed.hub import Rendered
from store.feed.live import FeedEvent
from tests.conftest import DEV, GatewayFactory
from tests.gql._api import ADD, REMOVE, UPDATE, ingest, unique
from tests.gql._feed import feed_client, newest_cursor
from tests.gql._policy_support import APPLY, POLICY

PLAIN = [
    "subscription { auditEvents { cursor payload } }",
    "subscription { auditEvents { id cursor kind recordId lane actor at payload } }",
    # aliases, __typename, fragments, a field asked twice, root arguments
    """
    fragment F on AuditEvent { kind at lane }
    subscription($k: [String!]) {
      events: auditEvents(kinds: $k) {
        payload __typename position: cursor ...F
        ... on AuditEvent { kind recordId who: actor }
      }
    }
    """,
]
EXECUTED = [
    "subscription { auditEvents { cursor after { content } } }",
    "subscription($on: Boolean!) { auditEvents { cursor kind @include(if: $on) } }",
]


def test_only_plain_selections_are_compiled() -> None:
    for query in PLAIN:
        assert plain_selection(schema, query, None) is not None, query
    for query in EXECUTED:
        assert plain_selection(schema, query, None) is None, query


async def test_plain_selections_render_as_execution_does(
    start_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = await start_gateway(anonymous_agent=DEV)
    compared: list[tuple[str, int]] = []
    # Collected, not asserted in place: a rendering runs as a task of its own, whose
    # failure the feed turns into executing each event for each subscriber.
    differing: list[tuple[Rendered, Rendered]] = []
    render = subscription._render

    async def both(
        schema: Any,
        outlet: Any,
        services: Any,
        agent: str,
        policy: Any,
        events: Sequence[FeedEvent],
    ) -> Rendered:
        made = await render(schema, outlet, services, agent, policy, events)
        executed = await subscription._execute(schema, outlet, services, agent, policy, events)
        if made != executed:
            differing.append((made, executed))
        if plain_selection(schema, outlet.query, outlet.operation_name):
            compared.extend((outlet.query, e.event.seq) for e in events)
        return made

    monkeypatch.setattr(subscription, "_render", both)
    queries = PLAIN + EXECUTED
    async with feed_client(gateway) as client:
        for n, query in enumerate(queries):
            await client.subscribe(str(n), query, on=True)
        for _ in range(40):  # live on every one: a probe reaches each
            await ingest(gateway, "probe")
            await asyncio.sleep(0.2)
            if all(not client.queues[str(n)].empty() for n in range(len(queries))):
                break
        topic = unique("topic:café-✓-")
        record = await ingest(gateway, 'first "quoted" \\ naïve', [topic, "stage:draft"])
        await gateway.data(UPDATE, {"id": record["id"], "content": "second ✓"})
        await gateway.data(ADD, {"id": record["id"], "properties": ["stage:review"]})
        await gateway.data(REMOVE, {"id": record["id"], "properties": [topic]})
        # An event about no record: its recordId and lane are null.
        policy = (await gateway.data(POLICY))["policy"]
        await gateway.data(APPLY, {"yaml": policy["yaml"] + "# applied again\n"})
        last = await newest_cursor(gateway)
        for n in range(len(queries)):
            while True:
                message = await client.message(str(n))
                assert "errors" not in message["payload"], message
                event = next(iter(message["payload"]["data"].values()))
                if event.get("cursor", event.get("position")) == last:
                    break
    assert not differing
    # Every plain selection was rendered from the values, the policy event among them.
    assert {query for query, _ in compared} == set(PLAIN)
    assert all((query, int(last)) in compared for query in PLAIN)
