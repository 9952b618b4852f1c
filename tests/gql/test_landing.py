"""`GET /` names where each part of the gateway is served, its version and its mode."""

from __future__ import annotations

from importlib.metadata import version

from tests.conftest import GatewayFactory
from tests.support import Gateway

PATHS = ["/graphql", "/dashboard", "/mcp", "/metrics", "/healthz"]


async def test_the_root_is_a_page_naming_every_endpoint(gateway: Gateway) -> None:
    response = await gateway.client.get(gateway.url + "/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    for path in PATHS:
        assert f'<a href="{path}"><code>{path}</code></a>' in page, path
    assert f"<h1>edgeloom {version('edgeloom')}</h1>" in page
    assert "Mode: development: calls without a token act as agent 'dev'" in page
    # Each link leads somewhere that answers.
    for path in ["/dashboard", "/healthz", "/metrics"]:
        assert (await gateway.client.get(gateway.url + path)).status_code == 200, path


async def test_a_client_asking_for_json_gets_json(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(policy_yaml=crm_yaml)
    response = await gateway.client.get(
        gateway.url + "/", headers={"accept": "application/json, text/html;q=0.5"}
    )
    assert response.status_code == 200
    about = response.json()
    assert about["name"] == "edgeloom" and about["version"] == version("edgeloom")
    assert about["mode"] == "policy"
    assert list(about["endpoints"]) == PATHS
    # A browser's Accept header, which names HTML first, still gets the page.
    browser = "text/html,application/xhtml+xml,application/json;q=0.9,*/*;q=0.8"
    page = await gateway.client.get(gateway.url + "/", headers={"accept": browser})
    assert page.headers["content-type"].startswith("text/html")
    assert "Mode: policy: every call needs a bearer token" in page.text
