"""Node and npm for the tests that drive JavaScript clients (the graphql-http audit, the
graphql-ws reference client): without them a test is skipped, or fails where CI
requires them (EDGELOOM_REQUIRE_NODE, set by .ci/run)."""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE = "EDGELOOM_REQUIRE_NODE"


def node_or_skip(why: str) -> tuple[str, str]:
    """The paths of node and npm; without both, skipped, or failed when required."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing = " and ".join(n for n, p in (("node", node), ("npm", npm)) if p is None)
        if os.environ.get(REQUIRE):
            pytest.fail(f"{REQUIRE} is set but {missing} is not installed ({why})")
        pytest.skip(f"{missing} is not installed ({why}; CI installs Node and npm)")
    return node, npm
