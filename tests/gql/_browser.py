"""Headless Chromium for the browser tests: Debian's package, as CI installs it."""

from __future__ import annotations

import os
import shutil

import pytest

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
