"""Every response forbids framing and type sniffing; the two pages send a strict policy."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support import Gateway

PAGES = {"/dashboard": "text/html", "/graphql": "text/html"}


def assert_guarded(response: httpx.Response) -> None:
    assert response.headers["x-content-type-options"] == "nosniff", response.url
    assert response.headers["x-frame-options"] == "DENY", response.url
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"], response.url


async def test_every_response_forbids_framing_and_sniffing(gateway: Gateway) -> None:
    client, url = gateway.client, gateway.url
    responses = [
        await client.get(url + "/healthz"),
        await client.post(url + "/graphql", json={"query": "{ labels { label } }"}),
        await client.post(url + "/graphql", json={"query": "{ nope }"}),
        await client.put(url + "/graphql"),
        await client.get(url + "/dashboard/static/dashboard.js"),
        await client.get(url + "/graphiql/static/page.js"),
        await client.get(url + "/no-such-page"),
        # Refused before anything else runs: not addressed to loopback.
        await client.get(url + "/healthz", headers={"host": "attacker.example"}),
    ]
    assert [r.status_code for r in responses] == [200, 200, 200, 405, 200, 200, 404, 403]
    for response in responses:
        assert_guarded(response)
    # What is not a page allows nothing at all.
    assert responses[0].headers["content-security-policy"] == (
        "default-src 'none'; frame-ancestors 'none'"
    )


@pytest.mark.parametrize("path", PAGES)
async def test_the_pages_send_a_strict_policy_and_hold_nothing_inline(
    gateway: Gateway, path: str
) -> None:
    response = await gateway.client.get(gateway.url + path, headers={"accept": "text/html"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert_guarded(response)
    policy = dict(
        directive.strip().split(" ", 1)
        for directive in response.headers["content-security-policy"].split(";")
    )
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"
    assert policy["connect-src"] == "'self'"
    assert "unsafe" not in response.headers["content-security-policy"]
    # Inline code would not run under that policy, so the page has none.
    html = response.text
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []
    assert re.findall(r"<style\b|\sstyle=|\son[a-z]+=", html) == []
