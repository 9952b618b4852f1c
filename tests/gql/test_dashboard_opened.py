"""The dashboard as a person first sees it, in headless Chromium at two window sizes:
the recent past replayed on open, a table that reads, and a large neighbourhood whose
labels stay apart. The screenshots are kept in tests/artifacts/dashboard-opened/."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import DEV, GatewayFactory
from tests.gql._api import ADD, INGEST_MANY, UPDATE, ingest, unique
from tests.gql._browser import ARGS, browser_or_skip, open_page
from tests.gql._edges import upsert
from tests.support import REPO, Gateway, sql

ARTIFACTS = REPO / "tests" / "artifacts" / "dashboard-opened"
pytestmark = pytest.mark.browser


# What a person sees on opening the page, measured in it (all in CSS pixels of the page).
HEADERS = """() => [...document.querySelectorAll('section.events thead th')].map(th => {
  const range = document.createRange();
  range.selectNodeContents(th);
  const box = range.getBoundingClientRect();
  return [th.textContent, box.left, box.right];
})"""
RECORD_CELLS = """() => {
  const panel = document.querySelector('section.events');
  const padding = parseFloat(getComputedStyle(panel).paddingRight);
  const inner = panel.getBoundingClientRect().right - padding;
  return [...document.querySelectorAll('#events tr.record')].map(row => {
    const cell = row.cells[row.cells.length - 1];
    return [row.dataset.record, cell.getBoundingClientRect().right - inner, cell.title];
  });
}"""
PANEL_BOTTOM = (
    "() => innerHeight - document.querySelector('section.events').getBoundingClientRect().bottom"
)
# Each node's label box on screen, and the zoom (the labels' font is 9 px at zoom 1).
LABELS = """() => {
  const cy = window.edgeloomDashboard.cy;
  const boxes = cy.nodes().map(n => {
    const b = n.renderedBoundingBox(
      {includeNodes: false, includeEdges: false, includeLabels: true});
    return [n.id(), b.x1, b.y1, b.x2, b.y2];
  });
  return {boxes, zoom: cy.zoom(), size: [cy.width(), cy.height()]};
}"""
# A point of the page beside a typed edge's line (`reach` pixels off it, between a tenth
# and nine tenths of its length) where no node, label or other typed edge is near.
BESIDE_EDGE = """([reach]) => {
  const cy = window.edgeloomDashboard.cy;
  const frame = document.getElementById('graph').getBoundingClientRect();
  const clear = (x, y) => cy.elements().every(e => {
    const b = e.isNode()
      ? e.renderedBoundingBox({includeLabels: true})
      : e.renderedBoundingBox({includeNodes: false, includeEdges: false, includeLabels: true});
    return !(x > b.x1 - 4 && x < b.x2 + 4 && y > b.y1 - 4 && y < b.y2 + 4);
  });
  for (const edge of cy.edges('.typed')) {
    const s = edge.renderedSourceEndpoint(), t = edge.renderedTargetEndpoint();
    const length = Math.hypot(t.x - s.x, t.y - s.y);
    const [nx, ny] = [-(t.y - s.y) / length, (t.x - s.x) / length];
    for (let at = 0.1; at < 0.9; at += 0.02) {
      for (const side of [1, -1]) {
        const x = s.x + (t.x - s.x) * at + side * reach * nx;
        const y = s.y + (t.y - s.y) * at + side * reach * ny;
        const others = cy.edges('.typed').not(edge).every(o => {
          const p = o.renderedSourceEndpoint(), q = o.renderedTargetEndpoint();
          const l2 = (q.x - p.x) ** 2 + (q.y - p.y) ** 2;
          const along = ((x - p.x) * (q.x - p.x) + (y - p.y) * (q.y - p.y)) / l2;
          const k = Math.max(0, Math.min(1, along));
          return Math.hypot(x - p.x - k * (q.x - p.x), y - p.y - k * (q.y - p.y)) > 2 * reach;
        });
        if (others && clear(x, y) && !(edge.controlPoints() || []).length) {
          return [edge.id(), frame.left + x, frame.top + y];
        }
      }
    }
  }
  return null;
}"""
# Pixels off a typed edge's line where a hover must still find it: past what cytoscape
# itself allows (half the line's width, 2.5 at zoom 1, and 8 pixels), within EDGE_REACH.
EDGE_REACH_TRIED = 11
ROUNDS = 6


async def write_recent_past(gateway: Gateway) -> tuple[str, list[str]]:
    """A few hundred mixed events written over several seconds, ending with a record
    whose neighbourhood holds over 40 nodes and three typed edges; (its id, the edges)."""
    topic, org = unique("topic:replay-"), unique("org:replay-")
    on_topic: list[str] = []
    on_org: list[str] = []
    for round in range(ROUNDS):
        if round:
            await asyncio.sleep(1.1)  # the events of each round in seconds of their own
        inputs = [
            {
                "content": f"Round {round} note {n} about the renewal",
                "properties": [topic] if n < 4 else [org] if n < 7 else [f"n:{round}.{n}"],
            }
            for n in range(30)
        ]
        written = [
            r["id"] for r in (await gateway.data(INGEST_MANY, {"inputs": inputs}))["ingestMany"]
        ]
        on_topic += written[:4]
        on_org += written[4:7]
        for record_id in written[7:15]:
            await gateway.data(UPDATE, {"id": record_id, "content": "revised in review"})
        for record_id in written[15:19]:
            await gateway.data(ADD, {"id": record_id, "properties": ["stage:review"]})
        await upsert(gateway, fromId=written[19], toId=written[20], type="related_to")
    focus = await ingest(gateway, "The Acme renewal, as the account team sees it", [topic, org])
    outside = await ingest(gateway, "A note on neither value", [unique("topic:")])
    quote = {"quote": "renewal: April 1", "source": "contract.md", "offset": 42}
    typed = [
        await upsert(
            gateway,
            fromId=focus["id"],
            toId=on_topic[0],
            type="contradicts",
            weight=0.9,
            evidence=quote,
            detector="contract@1",
        ),
        await upsert(gateway, fromId=on_org[-1], toId=focus["id"], type="supports"),
        await upsert(gateway, fromId=focus["id"], toId=outside["id"], type="related_to"),
    ]
    return focus["id"], [edge["id"] for edge in typed]


@pytest.mark.over10s(
    "a real Chromium: over 200 events written, the page at two window sizes, each screenshotted"
)
async def test_opened_plainly_it_shows_the_recent_past_readably(
    start_gateway: GatewayFactory,
) -> None:
    """Opened without a cursor, the page replays the newest events by their own times, in
    a table whose headers stand apart, whose ids stay inside the panel and which takes
    the window's height; a neighbourhood of over 40 nodes keeps its labels apart, and a
    typed edge answers a hover beside its line. Screenshots at two window sizes are kept
    in tests/artifacts/dashboard-opened/ to be looked at."""
    executable = browser_or_skip()
    from playwright.async_api import async_playwright

    gateway = await start_gateway(anonymous_agent=DEV)
    focus, typed = await write_recent_past(gateway)
    async with sql(gateway.database_url) as conn:
        seqs = await conn.fetch("SELECT seq FROM audit_events ORDER BY seq DESC LIMIT 201")
    newest, start = str(seqs[0]["seq"]), str(seqs[200]["seq"])
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"dashboard screenshots in {ARTIFACTS}")
    seen: dict[tuple[int, int], dict[str, Any]] = {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            for width, height in ((1280, 800), (1920, 1080)):
                page, outside, errors = await open_page(
                    browser, gateway, "/dashboard", width, height
                )
                found: dict[str, Any] = {"outside": outside, "errors": errors}
                await page.wait_for_function(
                    "() => document.querySelectorAll('#events tr').length === 200", timeout=20_000
                )
                await page.wait_for_timeout(1500)  # a chart frame, and the rows' flash gone
                found["since"] = await page.text_content("#since")
                found["cursors"] = await page.eval_on_selector_all(
                    "#events tr", "rows => rows.map(r => r.dataset.cursor)"
                )
                found["chart"] = await page.evaluate("() => window.edgeloomDashboard.chart()")
                found["headers"] = await page.evaluate(HEADERS)
                found["ids"] = await page.evaluate(RECORD_CELLS)
                found["below"] = await page.evaluate(PANEL_BOTTOM)
                await page.screenshot(path=ARTIFACTS / f"events-{width}x{height}.png")
                await page.click(f'#events tr[data-record="{focus}"]')
                await page.wait_for_function(
                    "() => { const cy = window.edgeloomDashboard.cy;"
                    " return !!cy && cy.nodes().length > 40; }",
                    timeout=20_000,
                )
                found["labels"] = await page.evaluate(LABELS)
                beside = await page.evaluate(BESIDE_EDGE, [EDGE_REACH_TRIED])
                found["beside"] = beside
                if beside is not None:
                    await page.mouse.move(beside[1], beside[2])
                    await page.wait_for_timeout(200)
                    found["hovered"] = await page.get_attribute("#edge-info", "data-edge")
                await page.screenshot(path=ARTIFACTS / f"neighbourhood-{width}x{height}.png")
                seen[(width, height)] = found
                await page.close()
        finally:
            await browser.close()
    for size, found in seen.items():
        assert found["outside"] == [] and found["errors"] == [], size
        # The newest 200 events, after the cursor the page says it started from.
        assert found["since"] == f"after cursor {start}: the last 200 at open, then live", size
        assert found["cursors"][0] == newest and int(found["cursors"][-1]) > int(start), size
        # Plotted at their own seconds, not in the one they arrived in.
        times = {point["time"] for point in found["chart"]["points"]}
        assert len(times) >= ROUNDS - 2, (size, found["chart"])
        headers = found["headers"]
        for left, right in zip(headers, headers[1:], strict=False):
            assert right[1] - left[2] >= 8, (size, left, right)
        assert found["ids"] and all(over <= 0.5 for _, over, _ in found["ids"]), size
        assert all(title == record for record, _, title in found["ids"]), size
        # The events panel reaches down to the window's bottom (its margin is 12 px).
        assert found["below"] <= 16, (size, found["below"])
        boxes = found["labels"]["boxes"]
        overlapping = [
            (a[0], b[0])
            for i, a in enumerate(boxes)
            for b in boxes[i + 1 :]
            if min(a[3], b[3]) - max(a[1], b[1]) > 0.5 and min(a[4], b[4]) - max(a[2], b[2]) > 0.5
        ]
        assert overlapping == [], (size, overlapping)
        # Legible as drawn: the labels' 9 px font is scaled by the zoom that fits the panel.
        assert 9 * found["labels"]["zoom"] >= 6.5, (size, found["labels"]["zoom"])
        assert found["beside"] is not None, size
        assert found["beside"][0] in typed and found["hovered"] == found["beside"][0], size
