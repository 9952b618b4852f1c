"""Every command the `sh` blocks of the README and `docs/*.md` show works as printed after
the README's two commands (`scripts/serve`, `scripts/test`): each names a program those
install, each edgeloom command parses with the real command line and names only lanes and
agents of the policy its block runs under (the development policy, unless the block starts
`serve --policy`), and the cheap ones run against a development gateway's database."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gql.cli.main import _parser
from policies.loader import dev_policy, load_policy
from policies.model import Policy
from tests.docs_pages import blocks, page_text
from tests.support import EDGELOOM, REPO, Gateway, communicate_within

ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=")
SCRIPTS = {"scripts/serve", "scripts/test", "scripts/lock", "scripts/chaos", "scripts/client"}
PRINTED_EDGELOOM = ".venv/bin/edgeloom"
# Run for real: cheap, and concrete as printed (no placeholder to fill in).
RUN = {("intake",), ("token", "create"), ("token", "list"), ("mcp", "--print-config")}
SERVE_URL = "http://127.0.0.1:4000/"
DEV = dev_policy()


@dataclass(frozen=True)
class Command:
    block: str  # the page and the block's place on it
    line: str
    words: list[str]  # without leading VAR=value assignments and a trailing `&`


def docs_commands() -> Iterator[Command]:
    for block in blocks("sh"):
        for line in block.text.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[-1] == "&":
                words.pop()
            while words and ASSIGNMENT.match(words[0]):
                words.pop(0)
            if words:
                yield Command(block.name, line.strip(), words)


COMMANDS = list(docs_commands())


def edgeloom_arguments(command: Command) -> list[str] | None:
    """The arguments an edgeloom command line receives, or None for another program."""
    program, *rest = command.words
    if program == PRINTED_EDGELOOM:
        return rest
    if program == "scripts/serve":
        return ["serve", *rest]
    return None


def block_policy(block: str) -> Policy:
    """The policy a block's commands run under: the one it starts serve with, else the
    development policy (what the two commands leave in force)."""
    for command in COMMANDS:
        arguments = edgeloom_arguments(command) if command.block == block else None
        if arguments and arguments[0] == "serve":
            given = _parser().parse_args(arguments).policy
            if given is not None:
                return load_policy((REPO / given).read_text(encoding="utf-8"), str(given))
    return DEV


def test_the_readme_opens_with_the_two_commands() -> None:
    first = blocks("sh")[0]
    assert first.page == "README.md" and page_text("README.md")[: first.offset] == "# edgeloom\n\n"
    assert [line.split()[0] for line in first.text.splitlines()] == [
        "scripts/serve",
        "scripts/test",
    ]


def test_the_docs_show_commands() -> None:
    assert {c.words[0] for c in COMMANDS} >= {"scripts/serve", PRINTED_EDGELOOM}


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.block}:{c.line[:50]}" for c in COMMANDS])
def test_each_command_names_what_the_two_commands_install(command: Command) -> None:
    program, *rest = command.words
    if program == "edgeloom":
        pytest.fail(f"{command.line!r}: edgeloom is not on the PATH; print {PRINTED_EDGELOOM}")
    if program in SCRIPTS:
        assert os.access(REPO / program, os.X_OK), command.line
    elif program == ".venv/bin/python":
        assert rest[0] == "-m" and importlib.util.find_spec(rest[1]) is not None, command.line
    elif program == "curl":
        assert any(word.startswith(SERVE_URL) for word in rest), command.line
    else:
        assert program == PRINTED_EDGELOOM, f"{command.line!r}: an unknown program"
    arguments = edgeloom_arguments(command)
    if arguments is None:
        return
    try:
        args = _parser().parse_args(arguments)
    except SystemExit:
        pytest.fail(f"{command.line!r}: edgeloom refuses these arguments")
    policy = block_policy(command.block)
    if args.command == "intake":
        assert args.lane in policy.lanes, (command.line, policy.lane_names())
        assert args.agent in policy.agents, (command.line, sorted(policy.agents))
    if args.command == "token" and args.token_command == "create":
        assert args.agent in policy.agents, (command.line, sorted(policy.agents))


async def test_the_cheap_commands_run_as_printed(gateway: Gateway, tmp_path: Path) -> None:
    """Run where the docs' reader runs them (the repository), with a home holding a
    notes folder, against a development gateway's database: the commands of every block
    that runs under the development policy."""
    printed = REPO / PRINTED_EDGELOOM
    program = str(printed if printed.exists() else EDGELOOM)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "runbook.md").write_text("# Runbook\n\nRestart the service.\n")
    env = {**os.environ, "HOME": str(tmp_path), "DATABASE_URL": gateway.database_url}
    ran = []
    for command in COMMANDS:
        program_name, *arguments = command.words
        run = [r for r in RUN if tuple(arguments[: len(r)]) == r]
        # A block that starts serve with a policy of its own needs that serve running.
        if program_name != PRINTED_EDGELOOM or not run or block_policy(command.block) != DEV:
            continue
        home = [str(tmp_path) + word[1:] if word.startswith("~/") else word for word in arguments]
        process = await asyncio.create_subprocess_exec(
            program,
            *home,
            cwd=REPO,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await communicate_within(process, f"edgeloom (pid {process.pid})")
        assert process.returncode == 0, (command.line, out.decode(), err.decode())
        if run[0] == ("mcp", "--print-config"):
            assert set(json.loads(out)["mcpServers"]) == {"edgeloom", "edgeloom-http"}, out
        ran.append(run[0])
    assert sorted(ran) == sorted(RUN)


PYTHON_MODULES = sorted({c.words[2] for c in COMMANDS if c.words[0] == ".venv/bin/python"})


@pytest.mark.parametrize("module", PYTHON_MODULES)
def test_each_python_command_takes_the_options_shown(module: str) -> None:
    """`python -m MODULE --help` runs (cheap: it measures nothing), and every option a
    command shows for the module is one its help lists."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    listed = set(re.findall(r"--[a-z][a-z0-9-]*", done.stdout))
    for command in COMMANDS:
        if command.words[:3] == [".venv/bin/python", "-m", module]:
            shown = {word.split("=")[0] for word in command.words[3:] if word.startswith("--")}
            assert shown <= listed, (command.line, sorted(shown - listed))
