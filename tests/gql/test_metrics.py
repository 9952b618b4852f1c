"""/metrics: a scrape after a few calls finds every family with plausible values, and
only loopback clients or agents with read_metrics are served."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import Receive, Scope, Send

from tests.conftest import GatewayFactory
from tests.gql._api import INGEST, unique
from tests.gql._feed import feed_client, newest_cursor
from tests.gql._policy_support import mint
from tests.support import Gateway

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

SCRAPER_POLICY = """
lanes:
  notes: {}
agents:
  writer: { read: [notes], write: [notes] }
  scraper: { read_metrics: true }
"""


def samples(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


async def scrape(gateway: Gateway) -> Samples:
    response = await gateway.client.get(gateway.url + "/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


async def test_a_scrape_after_a_few_calls_finds_every_family(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(anonymous_agent="dev", checkpoint_seconds=0.2)
    first = await scrape(gateway)
    assert value(first, "edgeloom_ledger_entries_per_second") == 0
    start = await newest_cursor(gateway)
    async with feed_client(gateway) as client:
        await client.subscribe("all", after=start)
        await client.subscribe("also", after=start)  # the same operation and rights: one group
        for n in range(3):
            await gateway.data(INGEST, {"input": {"content": unique(f"m{n}-"), "properties": []}})
        await gateway.data("{ records(first: 1) { totalCount } }")
        await gateway.data("{ profile { agent } policy { version } }")
        await gateway.error('{ record(id: "not-an-id") { id } }')
        await client.events("all", 3)
        await client.events("also", 3)
        # Caught up, the subscribers are fed by the hub: one more write reaches both.
        await gateway.data(INGEST, {"input": {"content": unique("live-"), "properties": []}})
        await client.events("all", 1)
        await client.events("also", 1)
        await asyncio.sleep(0.3)  # a checkpoint is taken after the writes
        found = await scrape(gateway)
    requests = "edgeloom_requests_total"
    assert value(found, requests, operation="ingest", route="compiled") == 4
    assert value(found, requests, operation="records", route="compiled") == 1
    assert value(found, requests, operation="multiple", route="ordinary") == 1
    assert value(found, requests, operation="record", route="ordinary") == 1
    errors = "edgeloom_errors_total"
    assert value(found, errors, operation="record", code="BAD_USER_INPUT") == 1
    assert not any(
        name == errors and dict(labels)["operation"] == "ingest" for name, labels in found
    )
    latency = "edgeloom_request_duration_seconds"
    assert value(found, latency + "_count", operation="ingest") == 4
    assert 0 < value(found, latency + "_sum", operation="ingest") < 30
    assert value(found, latency + "_bucket", operation="ingest", le="+Inf") == 4
    in_use = value(found, "edgeloom_pool_connections", state="in_use")
    assert value(found, "edgeloom_pool_connections", state="size") == 4
    assert 0 <= in_use <= 4
    assert value(found, "edgeloom_feed_subscribers") == 2
    assert value(found, "edgeloom_feed_groups") == 1
    # Each write's events reached both subscribers.
    assert value(found, "edgeloom_feed_deliveries_total") >= 2
    assert value(found, "edgeloom_feed_slow_consumers_closed_total") == 0
    assert 0 <= value(found, "edgeloom_feed_lag_seconds") < 30
    assert value(found, "edgeloom_ledger_position") >= 4
    assert value(found, "edgeloom_ledger_entries_per_second") > 0
    assert 0 <= value(found, "edgeloom_checkpoint_age_seconds") < 30
    # The subscribers are gone at the next sample.
    for _ in range(100):
        after = await scrape(gateway)
        if value(after, "edgeloom_feed_subscribers") == 0:
            break
        await asyncio.sleep(0.05)
    assert value(after, "edgeloom_feed_subscribers") == 0
    assert value(after, "edgeloom_feed_groups") == 0


def from_address(gateway: Gateway, address: str) -> httpx.AsyncClient:
    """A client whose requests reach the gateway's app as if from `address` (the same
    app and services, without a second network interface)."""
    assert gateway.state is not None
    state = gateway.state

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await gateway.app({**scope, "state": dict(state)}, receive, send)

    transport = httpx.ASGITransport(app=app, client=(address, 40_000))
    return httpx.AsyncClient(transport=transport, base_url="http://gateway.example")


async def test_metrics_are_refused_elsewhere_without_a_token_that_allows_them(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(policy_yaml=SCRAPER_POLICY, allowed_hosts=("gateway.example",))
    tokens = await mint(gateway, "writer", "scraper")
    async with from_address(gateway, "203.0.113.9") as remote:
        for headers in ({}, {"authorization": f"Bearer {tokens['writer']}"}):
            refused = await remote.get("/metrics", headers=headers)
            assert refused.status_code == 403
            [error] = refused.json()["errors"]
            assert error["extensions"]["code"] == "FORBIDDEN"
            assert "read_metrics: true" in error["message"]
        bad = await remote.get("/metrics", headers={"authorization": "Bearer elt_nope"})
        assert bad.status_code == 403
        allowed = await remote.get(
            "/metrics", headers={"authorization": f"Bearer {tokens['scraper']}"}
        )
        assert allowed.status_code == 200
        found: dict[Any, float] = samples(allowed.text)
        assert ("edgeloom_ledger_position", ()) in found
    # Loopback needs no token.
    await scrape(gateway)


async def test_only_graphql_requests_are_counted(gateway: Gateway) -> None:
    before = await scrape(gateway)
    await gateway.client.get(gateway.url + "/healthz")
    after = await scrape(gateway)
    counted = {k: v for k, v in after.items() if k[0] == "edgeloom_requests_total"}
    assert counted == {k: v for k, v in before.items() if k[0] == "edgeloom_requests_total"}
