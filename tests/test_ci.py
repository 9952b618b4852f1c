"""CI's own checks: the Node tests fail rather than skip where required, and the audit
fails on a known-vulnerable pin but not when the vulnerability service is away."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gql._node import REQUIRE, node_or_skip
from tests.support import REPO

AUDIT = REPO / ".ci" / "audit.py"


def test_without_node_the_tests_fail_where_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to find here
    monkeypatch.delenv(REQUIRE, raising=False)
    with pytest.raises(pytest.skip.Exception):
        node_or_skip("a test")
    monkeypatch.setenv(REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception, match="node and npm is not installed"):
        node_or_skip("a test")


def audit(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, str(AUDIT), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr


def test_the_audit_fails_on_a_known_vulnerable_pin(tmp_path: Path) -> None:
    # A report as pip-audit writes it (--format json).
    report = {
        "dependencies": [
            {"name": "jinja2", "version": "2.11.2", "vulns": [
                {"id": "PYSEC-2021-66", "fix_versions": ["2.11.3"], "aliases": []},
            ]},
            {"name": "orjson", "version": "3.11.0", "vulns": []},
        ],
        "fixes": [],
    }  # fmt: skip
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    code, out = audit("--report", str(path))
    assert code == 1, out
    assert "jinja2==2.11.2 has PYSEC-2021-66; fixed in 2.11.3" in out
    report["dependencies"] = report["dependencies"][1:]
    path.write_text(json.dumps(report))
    assert audit("--report", str(path)) == (
        0,
        f"audit: {path}: no known vulnerabilities in 1 pins\n",
    )


def test_the_audit_says_so_and_passes_when_the_service_cannot_be_reached() -> None:
    closed = "http://127.0.0.1:9"  # nothing listens on the discard port here
    env = {**os.environ, "HTTPS_PROXY": closed, "HTTP_PROXY": closed, "NO_PROXY": ""}
    code, out = audit("requirements.lock", env=env)
    assert code == 0, out
    assert "audit: requirements.lock: not audited: the vulnerability service" in out, out
