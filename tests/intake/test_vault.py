"""A vault written the way Obsidian users write one: intake finds exactly the links
Obsidian's rules find (names in any case, the nearest of several files so named, table
pipes, attachments, no title fallback, code inside a callout), accounts for every link,
refreshes the times a checkout moved so the next run reads nothing, and keeps the ids of
edges that only moved."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from policies.properties import METADATA_PREFIX
from store.intake.records import READING
from store.intake.report import IntakeReport
from store.intake.run import Intake
from store.intake.sources import FolderSource
from store.kinds.record.commands import Update
from store.ledger.command import Command
from tests.conftest import GatewayFactory
from tests.intake._engine import engine
from tests.intake.test_cli_intake import POLICY
from tests.support import sql

HOME = """# Home
See [[formulas]] and [[FORMULAS#Functions]] and [more](Formulas.md).
| Note | Alias |
| --- | --- |
| [[Table view\\|Table]] | [[Table view#layout\\|the layout]] |
Embed ![[map.png]], read [[Guide.pdf]], see [[map.png#interface]].
Placeholder [[Example]], then [[notes]] and [[deep/notes]].

> [!note] A callout
> ```
> [[In callout code]]
> ```
> After the code, [[Table view]] again.

## Glossary
Here: [[#glossary]], [[Home#GLOSSARY]], up: [[#home]]. Twice: [[formulas]] [[Formulas|f]].
"""
VAULT: dict[str, bytes] = {
    "Home.md": HOME.encode(),
    "Formulas.md": b"# Formulas\nIntro.\n## functions\nSee [[Table View]].\n",
    "Table view.md": b"# Table view\n## Layout\nBack [[home]].\n",
    # Headings named like notes, or like a link that names no note: never link targets.
    "Bases/Syntax.md": b"# Bases syntax\n## Example\nUses [[formulas]].\n## Home\nx\n",
    "a/notes.md": b"# A notes\nSee [[../Home]].\n",
    "b/deep/notes.md": b"# Deep notes\nSee [[a/notes]].\n",
    "map.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "Guide.pdf": b"%PDF-1.4 a guide",
}
Ref = tuple[str, int | None]
# What Obsidian's rules find: (detector, from (file, part), to (file, part or None)).
OBSIDIAN: set[tuple[str, Ref, Ref]] = {
    ("wikilink@1", ("Home.md", 0), ("Formulas.md", None)),
    ("wikilink@1", ("Home.md", 0), ("Formulas.md", 1)),
    ("mdlink@1", ("Home.md", 0), ("Formulas.md", None)),
    ("wikilink@1", ("Home.md", 0), ("Table view.md", None)),
    ("wikilink@1", ("Home.md", 0), ("Table view.md", 1)),
    ("wikilink@1", ("Home.md", 0), ("map.png", None)),
    ("wikilink@1", ("Home.md", 0), ("Guide.pdf", None)),
    ("wikilink@1", ("Home.md", 0), ("a/notes.md", None)),
    ("wikilink@1", ("Home.md", 0), ("b/deep/notes.md", None)),
    ("wikilink@1", ("Home.md", 1), ("Home.md", 0)),
    ("wikilink@1", ("Home.md", 1), ("Formulas.md", None)),
    ("wikilink@1", ("Formulas.md", 1), ("Table view.md", None)),
    ("wikilink@1", ("Table view.md", 1), ("Home.md", None)),
    ("wikilink@1", ("Bases/Syntax.md", 1), ("Formulas.md", None)),
    ("wikilink@1", ("a/notes.md", 0), ("Home.md", None)),
    ("wikilink@1", ("b/deep/notes.md", 0), ("a/notes.md", None)),
}
LINKS = (
    "links found: 22: 16 edges, 1 unresolved, 5 skipped; "
    "2 a link to the section that holds it; "
    "3 a second link from its section to the same target"
)


def write_vault(root: Path) -> Path:
    for rel, data in VAULT.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


async def run(url: str, folder: Path, lane: str = "notes") -> IntakeReport:
    """One intake of `folder` into `lane`, in process, as the CLI runs it."""
    async with engine(url) as on:

        async def execute(command: Command[Any]) -> Any:
            return await on.executor.execute("writer", command)

        return await Intake(
            FolderSource(folder), lane, "vault", "writer", on.policy, on.snapshot, execute
        ).run()


async def state(url: str) -> tuple[dict[str, dict[str, str]], dict[str, Ref]]:
    """Each current record's labels, and each file's or part's record as a ref."""
    async with sql(url) as conn:
        rows = await conn.fetch("SELECT id, content, properties FROM records WHERE lane = 'notes'")
    # Edge properties and metadata alike (a metadata key without its prefix).
    labels = {
        r["id"]: {k.removeprefix(METADATA_PREFIX): v for k, v in json.loads(r["properties"])}
        for r in rows
    }
    paths = {p["file_id"]: p["path"] for p in labels.values() if "path" in p}
    refs: dict[str, Ref] = {}
    for record_id, p in labels.items():
        if "path" in p:
            refs[record_id] = (p["path"], None)
        elif "part" in p:
            refs[record_id] = (paths[p["file_id"]], int(p["part"]))
    return labels, refs


async def live_edges(url: str) -> list[dict[str, Any]]:
    async with sql(url) as conn:
        rows = await conn.fetch(
            "SELECT id, from_id, to_id, detector, evidence, version, valid_at FROM edges "
            "WHERE namespace = 'intake' AND expired_at IS NULL"
        )
    return [{**dict(r), "evidence": json.loads(r["evidence"])} for r in rows]


def link_edges(found: list[dict[str, Any]], refs: dict[str, Ref]) -> set[tuple[str, Ref, Ref]]:
    return {
        (e["detector"], refs[e["from_id"]], refs[e["to_id"]])
        for e in found
        if e["detector"] in ("wikilink@1", "mdlink@1")
    }


async def test_a_vault_links_as_obsidian_resolves_them(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    url = (await start_gateway(policy_yaml=POLICY)).database_url
    folder = write_vault(tmp_path / "vault")
    report = await run(url, folder)
    assert not report.refused and not report.skipped, report.summary()
    labels, refs = await state(url)
    found = await live_edges(url)
    assert link_edges(found, refs) == OBSIDIAN
    # Every link accounted for: each edge detected is written, the others said why not.
    assert report.edges_written == sum(report.edges.values()) == len(found)
    assert LINKS in report.summary(), report.summary()
    [(target, line, reason)] = [(u.target, u.line, u.reason) for u in report.unresolved]
    assert (target, line) == ("Example", 7), reason
    # A quote is the line as written, the link at its offset (a table's escaped pipe too).
    text = {p: data.decode() for p, data in VAULT.items() if p.endswith(".md")}
    for e in found:
        if "quote" in e["evidence"]:
            source, at = e["evidence"]["source"], e["evidence"]["offset"]
            assert text[source][at:].startswith("[") and e["evidence"]["quote"] in text[source]
    # Attachments are file records (found by path, with size, media type and hash) and
    # no parts; their bytes are in no record.
    for path, media in (("map.png", "image/png"), ("Guide.pdf", "application/pdf")):
        [(record_id, held)] = [(i, p) for i, p in labels.items() if p.get("path") == path]
        assert held["media_type"] == media and held["size"] == str(len(VAULT[path]))
        assert [i for i, p in labels.items() if p.get("file_id") == held["file_id"]] == [record_id]
    async with sql(url) as conn:
        contents = [r["content"] for r in await conn.fetch("SELECT content FROM records")]
    assert not [c for c in contents if "PDF-1.4" in c or "IHDR" in c]

    # The same files again: nothing detected anew, the same account.
    again = await run(url, folder)
    assert again.not_read == len(VAULT) and again.records_written == 0
    assert LINKS in again.summary(), again.summary()

    # A file's record of an earlier reading (without `reading`, its links read otherwise)
    # is read again and rewritten, though the file did not change.
    [home] = [i for i, p in labels.items() if p.get("path") == "Home.md"]
    async with sql(url) as conn:
        body = json.loads(await conn.fetchval("SELECT content FROM records WHERE id = $1", home))
    del body["reading"]
    body["links"] = []
    async with engine(url) as on:
        await on.executor.execute("writer", Update(home, json.dumps(body)))
    reread = await run(url, folder)
    assert reread.changed == ["Home.md"] and reread.not_read == len(VAULT) - 1
    async with sql(url) as conn:
        body = json.loads(await conn.fetchval("SELECT content FROM records WHERE id = $1", home))
    assert body["reading"] == READING and len(body["links"]) == 17
    assert link_edges(await live_edges(url), refs) == OBSIDIAN

    # A link to a note not written yet resolves in the run that finds the note, valid
    # from that run's instant.
    (folder / "Example.md").write_text("# Example\n")
    started = datetime.now(UTC)
    later = await run(url, folder)
    assert later.created == ["Example.md"] and not later.unresolved
    labels, refs = await state(url)
    found = await live_edges(url)
    new = {("wikilink@1", ("Home.md", 0), ("Example.md", None))}
    assert link_edges(found, refs) == OBSIDIAN | new
    [edge] = [e for e in found if refs[e["to_id"]] == ("Example.md", None)]
    assert edge["valid_at"] >= started


async def test_a_checkout_is_refreshed_once_and_an_edit_keeps_edges_that_only_moved(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    url = (await start_gateway(policy_yaml=POLICY)).database_url
    folder = write_vault(tmp_path / "vault")
    await run(url, folder)
    before = {e["id"]: e for e in await live_edges(url)}

    # A checkout: every file's time moves, no content changes. Each record's time is
    # moved on (one version of its `modified` label), and nothing else is written.
    for rel in VAULT:
        stat = (folder / rel).stat()
        os.utime(folder / rel, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**10))
    second = await run(url, folder)
    assert (second.not_read, second.refreshed) == (0, len(VAULT)), second.summary()
    assert second.records_written == len(VAULT) and second.edges_written == 0
    assert not second.changed and not second.refused
    third = await run(url, folder)
    assert (third.not_read, third.refreshed, third.records_written) == (len(VAULT), 0, 0)

    # Two characters near the top of Home (two blank lines) shift every link below them:
    # the edges from Home keep their ids, each a new version with its new offset, and
    # none is retired.
    (folder / "Home.md").write_text(HOME.replace("# Home\n", "# Home\n\n\n"))
    edited = await run(url, folder)
    after = {e["id"]: e for e in await live_edges(url)}
    assert set(after) == set(before)
    moved = [i for i in after if after[i]["evidence"] != before[i]["evidence"]]
    assert len(moved) == 11
    for i in moved:
        assert after[i]["evidence"]["offset"] == before[i]["evidence"]["offset"] + 2
        assert after[i]["version"] == before[i]["version"] + 1
    assert (edited.edges_written, edited.edges_moved, edited.edges_retired) == (11, 11, 0)
    assert "written 11 (11 only moved), retired 0" in "\n".join(edited.summary())
