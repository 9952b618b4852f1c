"""GraphQL over HTTP by the spec: the graphql-http audit, media types, GET and methods."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from gql.server.view import SUBSCRIPTION_OVER_HTTP
from tests.conftest import DEV, GatewayFactory
from tests.gql._node import node_or_skip
from tests.support import Gateway, without_request_ids

AUDIT = """
const { serverAudits } = require('graphql-http');
(async () => {
  const results = [];
  for (const audit of serverAudits({ url: process.argv[2], fetchFn: fetch })) {
    const r = await audit.fn();
    results.push({ name: audit.name, status: r.status, reason: r.reason || '' });
  }
  console.log(JSON.stringify(results));
})();
"""
GRAPHQL_RESPONSE = "application/graphql-response+json"


async def run(*command: str, cwd: Path) -> str:
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode == 0, err.decode()[-2000:]
    return out.decode()


@pytest.fixture(scope="module")
async def auditor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The graphql-http package, installed from npm into a folder of this test's own."""
    node_or_skip("the graphql-http audit runs on Node")
    folder = tmp_path_factory.mktemp("graphql-http")
    await run(
        "npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "graphql-http@1",
        "graphql@16", cwd=folder,
    )  # fmt: skip
    (folder / "audit.cjs").write_text(AUDIT)
    return folder


async def test_the_graphql_http_audit_passes_without_warnings(
    auditor: Path, gateway: Gateway
) -> None:
    results: list[dict[str, Any]] = json.loads(
        await run("node", "audit.cjs", gateway.graphql_url, cwd=auditor)
    )
    assert len(results) > 50
    problems = [r for r in results if r["status"] in ("error", "warn")]
    assert problems == [], problems


async def test_request_errors_are_400_without_data_in_the_graphql_media_type(
    gateway: Gateway,
) -> None:
    for query in ("{ records {", "{ nope }"):
        asked = {"accept": GRAPHQL_RESPONSE}
        response = await gateway.client.post(
            gateway.graphql_url, json={"query": query}, headers=asked
        )
        assert response.status_code == 400
        assert response.headers["content-type"].startswith(GRAPHQL_RESPONSE)
        body = response.json()
        assert "data" not in body and body["errors"]
        # application/json stays as it was: 200, data null.
        response = await gateway.client.post(gateway.graphql_url, json={"query": query})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/json")
        assert response.json()["data"] is None


async def test_a_successful_read_answers_in_the_media_type_asked_for(gateway: Gateway) -> None:
    for accept, media in ((GRAPHQL_RESPONSE, GRAPHQL_RESPONSE), ("*/*", "application/json")):
        response = await gateway.client.post(
            gateway.graphql_url,
            json={"query": "{ records(first: 1) { items { id } } }"},
            headers={"accept": accept},
        )
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(media)
        assert "records" in response.json()["data"]


async def test_get_reads_are_never_cached_for_another_caller(gateway: Gateway) -> None:
    response = await gateway.client.get(
        gateway.graphql_url,
        params={"query": "{ records(first: 1) { totalCount } }"},
        headers={"accept": "application/json"},
    )
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    assert {v.strip() for v in response.headers["vary"].split(",")} >= {"Authorization", "Accept"}


async def test_mutations_over_get_and_other_methods_are_405_as_json(gateway: Gateway) -> None:
    response = await gateway.client.get(
        gateway.graphql_url,
        params={"query": 'mutation { ingest(input: {content: "via GET"}) { id } }'},
        headers={"accept": "application/json"},
    )
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert "mutation" in response.json()["errors"][0]["message"]
    for method in ("PUT", "DELETE", "PATCH"):
        response = await gateway.client.request(method, gateway.graphql_url, json={})
        assert response.status_code == 405
        assert response.headers["allow"] == "GET, POST"
        assert response.headers["content-type"].startswith("application/json")
        assert method in response.json()["errors"][0]["message"]


SUBSCRIPTIONS = (
    ("subscription { auditEvents { cursor } }", {}),
    (
        "subscription Resume($after: String) { auditEvents(after: $after) { cursor } }",
        {"after": "0"},
    ),
    ('subscription { watch(match: ["topic:none"], initial: true) { change cursor } }', {}),
)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "ordinary"])
async def test_a_subscription_over_http_is_refused_naming_the_websocket(
    start_gateway: GatewayFactory, compiled: bool, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = await start_gateway(anonymous_agent=DEV, compiled_path=compiled)
    caplog.clear()  # what the start said (on a server without pgvector: vector search is off)
    with caplog.at_level(logging.WARNING):
        for query, variables in SUBSCRIPTIONS:
            for method in ("POST", "GET"):
                asked = {"query": query, "variables": variables}
                if method == "POST":
                    response = await gateway.client.post(gateway.graphql_url, json=asked)
                else:
                    params = {"query": query, "variables": json.dumps(variables)}
                    response = await gateway.client.get(
                        gateway.graphql_url, params=params, headers={"accept": "application/json"}
                    )
                assert response.status_code == 400, (method, query, response.text)
                [error] = without_request_ids(response.json())["errors"]
                assert error == {
                    "message": SUBSCRIPTION_OVER_HTTP,
                    "extensions": {"code": "BAD_USER_INPUT", "protocol": "graphql-transport-ws"},
                }, (method, query)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == [], caplog.text
