"""`intakeFolder`: the files a remote agent sends give the memory the CLI gives, under the
same limits as ingestMany and the same policy."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from store.errors import InvalidInputError
from store.intake.sources import IN_PARTS, SentFile, SentSource
from store.limits import MAX_BATCH, MAX_CONTENT_CHARS
from tests.conftest import GatewayFactory
from tests.gql._api import unique
from tests.gql._policy_support import mint
from tests.intake._folder import CLOSED, write_folder
from tests.intake.test_cli_intake import POLICY, intake, records
from tests.support import Gateway

REPORT = """
  lane folder folderId dryRun files recordsWritten unchanged notRead created changed
  moved { from to } removed retired skipped { path reason } notes { path reason }
  refused { path message } edges { detector count } edgesWritten edgesMoved edgesRetired
  unresolved { path line target reason } linksSkipped { reason count } refreshed pending
"""
INTAKE = f"""
mutation($lane: String!, $files: [FileInput!]!, $dryRun: Boolean, $folder: String,
         $complete: Boolean, $pathsAfter: String, $pathsThrough: String) {{
  intakeFolder(lane: $lane, files: $files, dryRun: $dryRun, folder: $folder, complete: $complete,
               pathsAfter: $pathsAfter, pathsThrough: $pathsThrough) {{ {REPORT} }}
}}
"""
MADE = re.compile(r"\b(?:sr|fo|fi)_[0-9a-f]{32}\b")


def sent(folder: Path) -> list[dict[str, Any]]:
    """The folder's files as a remote agent sends them."""
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stamp = datetime.fromtimestamp(path.stat().st_mtime_ns // 1000 / 1e6, UTC)
        files.append(
            {
                "path": path.relative_to(folder).as_posix(),
                "content": path.read_text(encoding="utf-8"),
                "modifiedAt": stamp.isoformat(),
            }
        )
    return files


async def send(gateway: Gateway, token: str, files: list[dict[str, Any]], **kw: Any) -> Any:
    variables = {"lane": "notes", "files": files, "folder": "notes", **kw}
    return (await gateway.data(INTAKE, variables, token))["intakeFolder"]


def contents(items: list[dict[str, Any]]) -> list[Any]:
    """Each record's content, properties and version, its made ids named by what they
    stand for (a file id by its file's path), in a stable order."""
    names = {}
    for r in items:
        held = dict(p.split(":", 1) for p in r["properties"])
        if "path" in held:
            names[held["file_id"]] = f"<file {held['path']}>"
        if "folder" in held:
            names[held["folder_id"]] = "<folder>"
    shown = []
    for r in items:
        props = sorted(MADE.sub(lambda m: names[m.group(0)], p) for p in r["properties"])
        shown.append((r["content"], props, r["version"]))
    return sorted(shown)


async def test_the_mutation_gives_what_the_cli_gives(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    folder = write_folder(tmp_path)
    by_cli = await start_gateway(policy_yaml=POLICY)
    by_api = await start_gateway(policy_yaml=POLICY)
    cli_tokens = await mint(by_cli, "curator")
    api_tokens = await mint(by_api, "writer", "curator")

    status, out, err = await intake(by_cli.database_url, folder)
    assert status == 0, (out, err)
    dry = await send(by_api, api_tokens["writer"], sent(folder), dryRun=True)
    assert dry["dryRun"] and dry["folderId"] is None
    assert await records(by_api, api_tokens["curator"]) == []
    report = await send(by_api, api_tokens["writer"], sent(folder))
    assert {k: v for k, v in report.items() if k not in ("dryRun", "folderId")} == {
        k: v for k, v in dry.items() if k not in ("dryRun", "folderId")
    }
    assert report["folderId"].startswith("fo_")
    assert report["recordsWritten"] == 16 and report["created"] == [
        "00-overview.md",
        "01-runbook.md",
        "other/notes.md",
        "plain.txt",
        "sub/guide.md",
        "sub/notes.md",
    ]
    assert {e["detector"]: e["count"] for e in report["edges"]} == {
        "mdlink@1": 2,
        "same_dir@1": 3,
        "sequence@1": 3,
        "wikilink@1": 3,
    }
    assert [(u["path"], u["line"], u["target"]) for u in report["unresolved"]] == [
        ("01-runbook.md", 3, "Overview"),
        ("01-runbook.md", 6, "later-note"),
        ("sub/guide.md", 2, "../../etc/passwd.md"),
    ]
    # The same records, the same properties, the same versions.
    from_cli = await records(by_cli, cli_tokens["curator"])
    from_api = await records(by_api, api_tokens["curator"])
    assert contents(from_api) == contents(from_cli)
    # And the CLI's summary says what the mutation's report says.
    assert f"records written: {report['recordsWritten']}; files unchanged: 0" in out

    again = await send(by_api, api_tokens["writer"], sent(folder))
    assert again["recordsWritten"] == 0 and again["notRead"] == 6
    assert (again["refreshed"], again["edgesMoved"], again["linksSkipped"]) == (0, 0, [])
    assert await records(by_api, api_tokens["curator"]) == from_api
    # Links that make no edge are counted by why.
    self_links = {"path": "self.md", "content": "# A\nSee [[#A]] and [[self#a]].\n"}
    dry = await send(by_api, api_tokens["writer"], [*sent(folder), self_links], dryRun=True)
    assert dry["linksSkipped"] == [{"reason": "a link to the section that holds it", "count": 2}]


async def test_limits_and_paths_are_refused_naming_what_is_allowed(gateway: Gateway) -> None:
    one = {"path": "a.md", "content": "a"}
    body = await gateway.post(
        INTAKE, {"lane": "default", "files": [one] * (MAX_BATCH + 1), "folder": "x"}
    )
    [error] = body["errors"]
    # The gateway's own list limit, that of ingestMany, names it first.
    assert f"lists may hold at most {MAX_BATCH} (ingestMany takes at most" in error["message"]
    # And how to send a larger folder without losing any of it.
    assert f"(for intakeFolder: {IN_PARTS})" in error["message"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    # And intake's own, for any other way in.
    with pytest.raises(InvalidInputError) as refused:
        SentSource([SentFile(f"{n}.md", "x") for n in range(MAX_BATCH + 1)])
    assert refused.value.message == (
        f"intakeFolder takes at most {MAX_BATCH} files per call (got {MAX_BATCH + 1}); {IN_PARTS}"
    )
    assert "complete: true" in IN_PARTS
    assert refused.value.allowed == MAX_BATCH
    big = {"path": "big.txt", "content": "x" * (MAX_CONTENT_CHARS + 1)}
    body = await gateway.post(INTAKE, {"lane": "default", "files": [big]})
    assert body["errors"][0]["message"] == (
        f"content is {MAX_CONTENT_CHARS + 1} characters; at most {MAX_CONTENT_CHARS} are allowed"
    )
    for path in ("../up.md", "/abs.md", "a/../../b.md", ".git/config", ""):
        body = await gateway.post(
            INTAKE, {"lane": "default", "files": [{"path": path, "content": "x"}]}
        )
        [error] = body["errors"]
        assert "is not inside the folder: give a relative path" in error["message"], path
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
    body = await gateway.post(INTAKE, {"lane": "default", "files": [one, one]})
    assert body["errors"][0]["message"] == "file path 'a.md' is given twice; give each once"


async def test_a_policy_refusal_names_the_file_and_what_is_allowed(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(policy_yaml=CLOSED)
    tokens = await mint(gateway, "writer", "reader")
    files = [{"path": "a.md", "content": "# A\n"}, {"path": "b.md", "content": "# B\n"}]
    done = await send(gateway, tokens["writer"], files)
    # The run goes on past the refused file.
    assert done["created"] == ["a.md"]
    [refused] = done["refused"]
    assert refused["path"] == "b.md"
    assert "path" in refused["message"] and "a.md" in refused["message"], refused
    # A lane whose policy refuses the folder's own record refuses the call.
    body = await gateway.post(INTAKE, {"lane": "strict", "files": files}, tokens["writer"])
    [error] = body["errors"]
    assert "memo" in error["message"], error
    body = await gateway.post(INTAKE, {"lane": "notes", "files": files}, tokens["reader"])
    [error] = body["errors"]
    assert error["message"] == "agent 'reader' may not write to lane 'notes'; writable lanes: []"
    assert error["extensions"]["code"] == "FORBIDDEN"


async def dev_send(gateway: Gateway, files: list[dict[str, Any]], **kw: Any) -> Any:
    """`intakeFolder` on the development gateway's open lane; the report."""
    variables = {"lane": "default", "files": files, **kw}
    return (await gateway.data(INTAKE, variables))["intakeFolder"]


async def test_a_sent_file_holding_nul_is_skipped_as_binary_as_the_cli_skips_it(
    gateway: Gateway,
) -> None:
    files = [
        {"path": "a.md", "content": "# A\n"},
        {"path": "image.png", "content": "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"},
    ]
    report = await dev_send(gateway, files, folder=unique("nul"))
    assert report["created"] == ["a.md"]
    assert report["skipped"] == [{"path": "image.png", "reason": "binary"}]
    assert report["refused"] == []


def part_files(*paths: str) -> list[dict[str, Any]]:
    return [{"path": p, "content": f"# {p}\nsee [the first](../part1/f0.md)\n"} for p in paths]


async def test_a_call_retires_only_what_it_says_it_is_complete_for(gateway: Gateway) -> None:
    folder = unique("parts")
    first = await dev_send(
        gateway, part_files("part1/f0.md", "part1/f1.md", "part1/f2.md"), folder=folder
    )
    assert len(first["created"]) == 3
    # A second part of the same folder: the first part is left as it is, and is still
    # the folder its links resolve in.
    second = await dev_send(
        gateway, part_files("part2/f0.md", "part2/f1.md", "part2/f2.md"), folder=folder
    )
    assert second["created"] == ["part2/f0.md", "part2/f1.md", "part2/f2.md"]
    assert second["removed"] == [] and second["retired"] == 0
    assert second["unresolved"] == []
    # The folder again, in two complete parts of a path range each, one file gone from
    # each: each part retires what its range lost, and nothing of the other's.
    parts = [
        ({"pathsThrough": "part1/f2.md"}, ["part1/f0.md", "part1/f2.md"], "part1/f1.md"),
        ({"pathsAfter": "part1/f2.md"}, ["part2/f0.md", "part2/f1.md"], "part2/f2.md"),
    ]
    for bounds, paths, gone in parts:
        done = await dev_send(gateway, part_files(*paths), folder=folder, complete=True, **bounds)
        assert done["removed"] == [gone] and done["unchanged"] == 2
    # One complete call for the whole folder retires every file it does not send.
    whole = await dev_send(gateway, part_files("part1/f0.md"), folder=folder, complete=True)
    assert whole["removed"] == ["part1/f2.md", "part2/f0.md", "part2/f1.md"]

    body = await gateway.post(
        INTAKE,
        {
            "lane": "default",
            "folder": folder,
            "files": part_files("part2/f0.md"),
            "complete": True,
            "pathsThrough": "part1/f2.md",
        },
    )
    [error] = body["errors"]
    assert error["message"] == (
        "file path 'part2/f0.md' is outside this call's range (paths up to 'part1/f2.md'); "
        "send it in the call whose range holds it"
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    body = await gateway.post(INTAKE, {"lane": "default", "files": [], "pathsAfter": "a.md"})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
