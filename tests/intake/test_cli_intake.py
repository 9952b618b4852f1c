"""`edgeloom intake`: a fixture folder becomes records, and re-runs write only changes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GatewayFactory
from tests.intake._folder import CLOSED, FILES, RECORDED, RUNBOOK, write_folder
from tests.support import Gateway, sql
from tests.test_cli import edgeloom

POLICY = """
lanes:
  notes: {}
  other: {}
agents:
  writer: { read: [notes], write: [notes] }
  curator: { read: ["*"], write: ["*"] }
"""
RECORDS = """
query($tag: String, $after: String) {
  records(lane: "notes", first: 500, tag: $tag, after: $after) {
    totalCount items { id content properties metadata version sourceType }
  }
}
"""


async def records(gateway: Gateway, token: str) -> list[dict[str, Any]]:
    found = (await gateway.data(RECORDS, {}, token))["records"]
    assert found["totalCount"] <= 500
    items: list[dict[str, Any]] = found["items"]
    return items


def props(record: dict[str, Any], label: str) -> list[str]:
    return [p.split(":", 1)[1] for p in record["properties"] if p.split(":", 1)[0] == label]


def meta(record: dict[str, Any], key: str) -> list[str]:
    """The record's metadata value under `key`, as a list like `props` gives."""
    found = record["metadata"].get(key)
    return [] if found is None else [found]


def by_path(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {props(r, "path")[0]: r for r in items if props(r, "path")}


async def intake(url: str, folder: Path, *extra: str) -> tuple[int, str, str]:
    return await edgeloom(
        url, "intake", str(folder), "--lane", "notes", "--agent", "writer", *extra
    )


@pytest.mark.over10s("four `edgeloom intake` processes, each a run as an operator makes it")
async def test_a_folder_becomes_records_and_reruns_write_only_changes(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    from tests.gql._policy_support import mint

    gateway = await start_gateway(policy_yaml=POLICY)
    token = (await mint(gateway, "curator"))["curator"]
    url = gateway.database_url
    folder = write_folder(tmp_path, tmp_path / "outside")

    # A dry run writes nothing and says what a run would write.
    status, out, err = await intake(url, folder, "--dry-run")
    assert status == 0, (out, err)
    assert await records(gateway, token) == []
    dry = out

    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    assert "Traceback" not in err
    # The same summary as the dry run's.
    assert out.splitlines()[1:] == dry.replace("would be ", "").splitlines()[1:], (out, dry)
    items = await records(gateway, token)
    files = by_path(items)
    assert sorted(files) == RECORDED
    [folder_record] = [r for r in items if props(r, "folder")]
    assert props(folder_record, "folder") == ["notes"]
    folder_id = props(folder_record, "folder_id")[0]
    assert folder_id.startswith("fo_")
    for path, record in files.items():
        assert props(record, "folder_id") == [folder_id]
        assert record["sourceType"] == "documentary"
        assert meta(record, "size") == [str(len(FILES[path]))]
        assert len(meta(record, "sha256")[0]) == 64
        assert meta(record, "modified")[0].endswith("+00:00")
        file_id = props(record, "file_id")[0]
        if path == "image.png":
            # An attachment: its record only, its media type, never its bytes.
            assert meta(record, "media_type") == ["image/png"]
            assert [r for r in items if props(r, "file_id") == [file_id]] == [record]
            continue
        parts = sorted(
            (r for r in items if props(r, "file_id") == [file_id] and not props(r, "path")),
            key=lambda r: int(meta(r, "part")[0]),
        )
        text = (folder / path).read_bytes().decode("utf-8", errors="replace")
        # The parts, in order, are the file; each keeps its offset.
        assert "".join(p["content"] for p in parts) == text
        for p in parts:
            assert text[int(meta(p, "offset")[0]) :].startswith(p["content"])
        body = json.loads(record["content"])
        assert body["file"] == path and body["parts"] == len(parts)
    assert json.loads(files["01-runbook.md"]["content"])["title"] == "Runbook"
    # Every link a file states is kept with its quote, found verbatim at its offset.
    stated = 0
    for path, record in files.items():
        text = (folder / path).read_bytes().decode("utf-8", errors="replace")
        for link in json.loads(record["content"])["links"]:
            assert text[link["offset"] :].startswith("[")
            assert link["quote"] == text.splitlines()[link["line"] - 1].strip()
            assert text.index(link["quote"]) <= link["offset"]
            stated += 1
    assert stated == 8
    assert "edges detected: wikilink@1 3, mdlink@1 2, sequence@1 3, same_dir@1 5" in out
    assert "links found: 8: 5 edges, 3 unresolved, 0 skipped" in out
    assert len(items) == 1 + len(RECORDED) + 9
    assert "skipped: " not in out.replace("skipped: leak.md", "")
    assert "skipped: leak.md: a link pointing outside the folder (not followed)" in out
    assert "note: latin1.txt: not valid UTF-8 (first bad byte at 3)" in out
    # No title fallback: `[[Overview]]` names no file (the overview's title is no name).
    assert "unresolved: 01-runbook.md:3: Overview (no file has this path or file name)" in out
    assert "unresolved: sub/guide.md:2: ../../etc/passwd.md (leaves the folder)" in out
    assert "unresolved: 01-runbook.md:6: later-note (no file has this path" in out

    # Nothing changed: nothing is read, nothing written.
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    assert (
        f"records written: 0; files unchanged: {len(RECORDED)} ({len(RECORDED)} not read, 0 "
        "with their time refreshed)" in out
    )
    assert await records(gateway, token) == items

    # A touched file with the same content is read and its record's time moved on.
    os.utime(folder / "plain.txt", (1_700_000_000, 1_700_000_000))
    status, out, err = await intake(url, folder)
    assert (
        f"records written: 1; files unchanged: {len(RECORDED)} ({len(RECORDED) - 1} not read, 1 "
        "with their time refreshed)" in out
    )

    # An edited file: a new version of its record, parts updated, added; no new record.
    edited = RUNBOOK.replace("## Steps", "## Checks\nNew section.\n\n## Steps")
    (folder / "01-runbook.md").write_text(edited)
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    assert "files new: 0, changed: 1, moved: 0, removed: 0" in out
    after = await records(gateway, token)
    runbook = by_path(after)["01-runbook.md"]
    assert runbook["id"] == files["01-runbook.md"]["id"] and runbook["version"] == 2
    file_id = props(runbook, "file_id")[0]
    parts = sorted(
        (r for r in after if props(r, "file_id") == [file_id] and not props(r, "path")),
        key=lambda r: int(meta(r, "part")[0]),
    )
    assert "".join(p["content"] for p in parts) == edited
    assert len(after) == len(items) + 1

    # A moved file keeps its record.
    (folder / "plain.txt").rename(folder / "sub" / "plain-moved.txt")
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    assert "moved: plain.txt -> sub/plain-moved.txt" in out
    moved = by_path(await records(gateway, token))
    assert "plain.txt" not in moved
    assert moved["sub/plain-moved.txt"]["id"] == files["plain.txt"]["id"]
    async with sql(url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM records WHERE lane = 'notes'") == len(
            after
        )

    # A broken link resolves once its target exists.
    (folder / "later-note.md").write_text("# Later\n")
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    assert "later-note" not in out and "files new: 1," in out
    assert "wikilink@1 4," in out

    # A removed file's record and parts are retired, never deleted.
    before = by_path(await records(gateway, token))
    gone = before["sub/notes.md"]
    (folder / "sub" / "notes.md").unlink()
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    assert "removed: 1" in out and "records retired: 2" in out, out
    left = await records(gateway, token)
    assert "sub/notes.md" not in by_path(left)
    assert not [r for r in left if props(r, "file_id") == props(gone, "file_id")]
    async with sql(url) as conn:
        kept = await conn.fetchval(
            "SELECT count(*) FROM ledger WHERE kind = 'record' AND object_id = $1", gone["id"]
        )
    assert kept == gone["version"] + 1

    # An edit that leaves a file fewer parts retires the parts it no longer has.
    (folder / "01-runbook.md").write_text("# Runbook\nShort now.\n")
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    assert "records retired: 2" in out, out
    runbook = by_path(await records(gateway, token))["01-runbook.md"]
    file_id = props(runbook, "file_id")
    parts = [r for r in await records(gateway, token) if props(r, "file_id") == file_id]
    assert sorted(r["content"] for r in parts if meta(r, "part")) == ["# Runbook\nShort now.\n"]


# Retitles the terminal and clears the screen; the other splits a line in two.
HOSTILE = ("x\x1b]0;pwned\x07\x1b[2J.md", "new\nline.md")


def printed_whole(text: str) -> None:
    """No terminal control sequence, and no line broken by a name."""
    assert "\x1b" not in text and "\x07" not in text, text
    for line in text.splitlines():
        assert line.startswith(("refused: ", "edgeloom: ", "folder ", "records ", "files ",
                                "edges ", "links ")), line  # fmt: skip


async def test_every_file_name_printed_is_escaped(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    gateway = await start_gateway(policy_yaml=CLOSED)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n")
    for name in HOSTILE:
        (folder / name).write_text("# hostile\n")
    status, out, err = await intake(gateway.database_url, folder)
    assert status == 0, (out, err)
    printed_whole(out + err)
    refused = sorted(line for line in out.splitlines() if line.startswith("refused: "))
    assert [line.split(": ")[1] for line in refused] == [
        "new\\nline.md",
        "x\\x1b]0;pwned\\x07\\x1b[2J.md",
    ], out
    # A path named on the command line is printed escaped too.
    status, out, err = await intake(gateway.database_url, folder / HOSTILE[0])
    assert status == 2
    printed_whole(out + err)
    assert "x\\x1b]0;pwned\\x07\\x1b[2J.md is not a folder" in err, err
