"""Headless Chromium for the browser tests: Debian's package, as CI installs it."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

from tests.support import Gateway

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def browser_or_skip() -> str:
    """Chromium's path; without one the test is skipped, or fails where it is required."""
    if CHROMIUM is None:
        if os.environ.get("EDGELOOM_REQUIRE_BROWSER"):
            pytest.fail("EDGELOOM_REQUIRE_BROWSER is set but no chromium is installed")
        pytest.skip("no chromium on this machine (CI installs Debian's chromium)")
    return CHROMIUM


def note_csp_violation(console_text: str, errors: list[str]) -> None:
    """Adds a console message to `errors` when it reports a Content-Security-Policy violation."""
    if "Content Security Policy" in console_text:
        errors.append(console_text)


async def open_page(
    browser: Any, gateway: Gateway, path: str, width: int = 1400, height: int = 900
) -> tuple[Any, list[str], list[str]]:
    """A page on `path` that may reach nothing but the gateway; its errors collected."""
    page = await browser.new_page(viewport={"width": width, "height": height})
    outside: list[str] = []
    errors: list[str] = []

    async def only_loopback(route: Any) -> None:
        url = route.request.url
        if url.startswith(gateway.url) or url.startswith("data:"):
            await route.continue_()
        else:
            outside.append(url)
            await route.abort()

    await page.route("**/*", only_loopback)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda message: note_csp_violation(message.text, errors))
    response = await page.goto(gateway.url + path)
    assert response is not None and response.status == 200
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    return page, outside, errors
