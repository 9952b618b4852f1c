"""GraphiQL served from the package, driven in headless Chromium against a live gateway."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.gql._browser import ARGS, browser_or_skip, note_csp_violation
from tests.support import Gateway

pytestmark = pytest.mark.browser

EDITOR = ".graphiql-query-editor .CodeMirror"
RESPONSE = ".graphiql-response .CodeMirror"


async def test_graphiql_runs_a_query_offline(gateway: Gateway) -> None:
    executable = browser_or_skip()
    from playwright.async_api import Route, async_playwright

    await gateway.data(
        'mutation { ingest(input: {content: "from the browser test", '
        'properties: ["topic:graphiql-check"]}) { id } }'
    )
    outside: list[str] = []

    async def only_loopback(route: Route) -> None:
        if route.request.url.startswith(gateway.url) or route.request.url.startswith("data:"):
            await route.continue_()
        else:
            outside.append(route.request.url)
            await route.abort()

    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=executable,
            args=ARGS,
        )
        try:
            page = await browser.new_page()
            await page.route("**/*", only_loopback)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda message: note_csp_violation(message.text, errors))
            # The editor's own wait below is the page being ready; the load event of every
            # script, on a machine busy with the rest of the suite, is not the point.
            response = await page.goto(
                gateway.graphql_url, wait_until="domcontentloaded", timeout=60_000
            )
            assert response is not None and response.status == 200
            assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
            await page.wait_for_selector(EDITOR, timeout=20_000)

            query = '{ edgeProperty(property: "topic:graphiql-check") { memberCount } }'
            await page.eval_on_selector(EDITOR, "(el, q) => el.CodeMirror.setValue(q)", query)
            # GraphiQL re-parses the document shortly after each change; run after that.
            await page.wait_for_function(
                "q => { const cm = document.querySelector('"
                + EDITOR
                + "').CodeMirror; return !!cm.documentAST"
                " && cm.documentAST.loc.source.body === q; }",
                arg=query,
            )
            await page.click(".graphiql-execute-button")
            await page.wait_for_function(
                "() => document.querySelector('"
                + RESPONSE
                + "').CodeMirror.getValue().includes('memberCount')",
                timeout=20_000,
            )
            text = await page.eval_on_selector(RESPONSE, "el => el.CodeMirror.getValue()")
            result: dict[str, Any] = json.loads(text)
            # A dialog adds a <style> element: the page's policy allows that one.
            await page.click('[aria-label="Open settings dialog"]')
            await page.wait_for_selector(".graphiql-dialog", timeout=20_000)
            await page.keyboard.press("Escape")
            await page.wait_for_timeout(300)
        finally:
            await browser.close()

    assert result == {"data": {"edgeProperty": {"memberCount": 1}}}
    assert outside == [], f"GraphiQL tried to reach outside the gateway: {outside}"
    assert errors == []
