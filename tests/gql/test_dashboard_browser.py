"""The live dashboard in headless Chromium against a live gateway."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import GatewayFactory
from tests.gql._api import ingest, unique
from tests.gql._browser import ARGS, browser_or_skip, note_csp_violation, open_page
from tests.gql._edges import upsert
from tests.gql._feed import newest_cursor
from tests.gql._policy_support import mint
from tests.support import REPO, Gateway

ARTIFACTS = REPO / "tests" / "artifacts"
pytestmark = pytest.mark.browser


async def test_events_arrive_live_and_a_record_shows_its_neighbourhood(
    gateway: Gateway, tmp_path: Path
) -> None:
    executable = browser_or_skip()
    from playwright.async_api import async_playwright

    topic = unique("topic:dashboard-")
    neighbour = await ingest(gateway, "Acme renewal call notes", [topic, "org:Acme"])
    after = await newest_cursor(gateway)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            page, outside, errors = await open_page(browser, gateway, f"/dashboard?after={after}")
            await page.wait_for_selector("#status.live", timeout=20_000)
            assert await page.is_hidden("#login")
            written = await ingest(gateway, "Sarah owns the Acme account", [topic, "person:Sarah"])
            row = f'#events tr[data-record="{written["id"]}"]'
            await page.wait_for_selector(row, timeout=20_000)
            cells = await page.eval_on_selector_all(
                row + " td", "cells => cells.map(c => c.textContent)"
            )
            assert cells[2:] == ["sr_ingested", "default", "dev", written["id"]]
            await page.click(row)
            await page.wait_for_function(
                "() => { const cy = window.edgeloomDashboard.cy;"
                " return !!cy && cy.nodes().length > 1; }",
                timeout=20_000,
            )
            nodes = await page.evaluate(
                "() => window.edgeloomDashboard.cy.nodes().map(n => n.id())"
            )
            counts = await page.eval_on_selector_all(
                "#by-kind td", "cells => cells.map(c => c.textContent)"
            )
            await page.wait_for_timeout(1200)  # one chart frame with the event in it
            shot = await page.screenshot(full_page=True)
        finally:
            await browser.close()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "dashboard.png").write_bytes(shot)
    (tmp_path / "dashboard.png").write_bytes(shot)
    # the record, each of its values as a hyperedge node, and the record sharing one
    assert set(nodes) == {
        written["id"],
        neighbour["id"],
        f"ep:{topic}",
        "ep:person:Sarah",
    }
    assert counts[:2] == ["sr_ingested", "1"]
    assert outside == [], f"the dashboard tried to reach outside the gateway: {outside}"
    assert errors == []


async def test_without_a_token_the_page_asks_for_one(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    executable = browser_or_skip()
    from playwright.async_api import async_playwright

    gateway = await start_gateway(policy_yaml=crm_yaml)
    planner = (await mint(gateway, "planner"))["planner"]
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            page, outside, errors = await open_page(browser, gateway, "/dashboard")
            await page.wait_for_selector("#login", state="visible", timeout=20_000)
            assert await page.is_hidden("#board")
            await page.fill("#token", "elt_wrong")
            await page.click("#login button[type=submit]")
            await page.wait_for_selector("#login-problem", state="visible", timeout=20_000)
            problem = await page.text_content("#login-problem")
            await page.fill("#token", planner)
            await page.click("#login button[type=submit]")
            await page.wait_for_selector("#status.live", timeout=20_000)
            who = await page.text_content("#who")
        finally:
            await browser.close()
    assert problem is not None and problem.startswith("the bearer token is unknown")
    assert who == "agent planner · reads crm, notes"
    assert outside == [] and errors == []


async def test_neither_page_loads_in_a_frame_of_another_origin(gateway: Gateway) -> None:
    """The dashboard keeps a token in local storage: no other page may frame it (or GraphiQL)."""
    executable = browser_or_skip()
    from playwright.async_api import async_playwright

    pages = {"/dashboard": "#status", "/graphql": "#graphiql"}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            page = await browser.new_page()
            refused: list[str] = []
            page.on("console", lambda message: note_csp_violation(message.text, refused))
            frames = "".join(f'<iframe src="{gateway.url}{path}"></iframe>' for path in pages)
            await page.set_content(f"<html><body>{frames}</body></html>")
            await page.wait_for_timeout(2000)
            rendered = []
            for frame in page.frames[1:]:
                for selector in pages.values():
                    if await frame.query_selector(selector) is not None:
                        rendered.append(frame.url)
        finally:
            await browser.close()
    assert rendered == []
    assert len([m for m in refused if "frame-ancestors 'none'" in m]) == len(pages), refused


async def test_the_neighbourhood_draws_typed_edges_with_their_evidence(gateway: Gateway) -> None:
    executable = browser_or_skip()
    from playwright.async_api import async_playwright

    focus = await ingest(gateway, "The renewal is due in March.", [unique("topic:typed-")])
    quoted = await ingest(gateway, "The contract says April.")
    asserted = await ingest(gateway, "Sam thinks May.")
    quote = {"quote": "renewal: April 1", "source": "contract.md", "offset": 42}
    contradicts = await upsert(
        gateway,
        fromId=focus["id"],
        toId=quoted["id"],
        type="contradicts",
        weight=0.9,
        evidence=quote,
        detector="contract@1",
    )
    related = await upsert(gateway, fromId=asserted["id"], toId=focus["id"], type="related_to")
    after = await newest_cursor(gateway)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            page, outside, errors = await open_page(browser, gateway, f"/dashboard?after={after}")
            await page.wait_for_selector("#status.live", timeout=20_000)
            # Any event about the record opens its neighbourhood.
            await upsert(
                gateway, fromId=focus["id"], toId=quoted["id"], type="contradicts", weight=0.8
            )
            row = f'#events tr[data-record="{focus["id"]}"]'
            await page.wait_for_selector(row, timeout=20_000)
            await page.click(row)
            await page.wait_for_function(
                "() => { const cy = window.edgeloomDashboard.cy;"
                " return !!cy && cy.edges('.typed').length === 2; }",
                timeout=20_000,
            )
            drawn = await page.evaluate(
                "() => window.edgeloomDashboard.cy.edges('.typed').map(e =>"
                " [e.id(), e.source().id(), e.target().id(), e.data('label')])"
            )
            shown = {}
            for edge_id in (contradicts["id"], related["id"]):
                # Hover, then click: both say what shows the edge. The braces make the
                # call return nothing: `emit` returns the cytoscape element, and Playwright
                # serialising that whole graph of objects exhausts the page's heap.
                await page.evaluate(
                    f"() => {{ window.edgeloomDashboard.cy.$id('{edge_id}').emit('mouseover'); }}"
                )
                hovered = await page.text_content("#edge-info")
                await page.evaluate(
                    f"() => {{ window.edgeloomDashboard.cy.$id('{edge_id}').emit('tap'); }}"
                )
                shown[edge_id] = (hovered, await page.text_content("#edge-info"))
            info = await page.text_content("#graph-info")
            shot = await page.screenshot(full_page=True)
        finally:
            await browser.close()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "dashboard-typed-edges.png").write_bytes(shot)
    assert sorted(drawn) == sorted(
        [
            [contradicts["id"], focus["id"], quoted["id"], "contradicts 0.8"],
            [related["id"], asserted["id"], focus["id"], "related_to 1"],
        ]
    )
    hovered, clicked = shown[contradicts["id"]]
    assert hovered == clicked
    assert clicked == (
        "contradicts · weight 0.8 · agent dev · contract@1\n“renewal: April 1” — contract.md:42"
    )
    assert shown[related["id"]][1].endswith("\nasserted, no evidence")
    assert info is not None and "2 typed edges" in info
    assert outside == [] and errors == []


async def test_the_filter_is_the_servers_and_a_pause_misses_nothing(gateway: Gateway) -> None:
    executable = browser_or_skip()
    from playwright.async_api import async_playwright

    topic = unique("topic:filtered-")
    after = await newest_cursor(gateway)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            page, outside, errors = await open_page(browser, gateway, f"/dashboard?after={after}")
            await page.wait_for_selector("#status.live", timeout=20_000)
            await page.fill("#f-match", topic)
            await page.fill("#f-agent", "dev")
            await page.click("#apply")
            await page.wait_for_function(
                "() => document.getElementById('status').textContent === 'live · filtered'",
                timeout=20_000,
            )
            other = await ingest(gateway, "not on the topic", [unique("topic:")])
            on_it = await ingest(gateway, "on the topic", [topic])
            await page.wait_for_selector(f'#events tr[data-record="{on_it["id"]}"]', timeout=20_000)

            await page.click("#pause")
            await page.wait_for_selector("#status.paused", timeout=20_000)
            while_paused = await ingest(gateway, "written during the pause", [topic])
            await page.wait_for_timeout(1000)
            shown_paused = await page.query_selector(
                f'#events tr[data-record="{while_paused["id"]}"]'
            )
            await page.click("#pause")  # resume, after the last event shown
            await page.wait_for_selector(
                f'#events tr[data-record="{while_paused["id"]}"]', timeout=20_000
            )
            await page.wait_for_timeout(500)
            received = await page.evaluate("() => window.edgeloomDashboard.state.received")
            rows = await page.eval_on_selector_all(
                "#events tr", "rows => rows.map(r => r.dataset.record)"
            )
            shot = await page.screenshot(full_page=True)
        finally:
            await browser.close()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "dashboard-filtered.png").write_bytes(shot)
    assert shown_paused is None
    # The gateway sent only what the filter admits: the other record never reached the page.
    assert received == 2
    assert rows == [while_paused["id"], on_it["id"]] and other["id"] not in rows
    assert outside == [] and errors == []
