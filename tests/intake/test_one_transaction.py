"""Each file's whole change is one transaction: its record and parts, the retirement of
the parts it no longer has and of its old detected edges, and its new edges; a removed
file's records and edges likewise. A refusal of any of it writes none of it, and the
run goes on with the other files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from store.intake.parts import split
from store.intake.run import Intake
from store.intake.sources import FolderSource
from store.kinds.record.retire import RetireRecord
from store.ledger.command import Command
from tests.conftest import GatewayFactory
from tests.gql._policy_support import mint
from tests.intake._engine import engine
from tests.intake._folder import RUNBOOK, write_folder
from tests.intake.test_cli_intake import POLICY, intake
from tests.intake.test_intake_folder import send
from tests.support import sql

Row = dict[str, Any]


async def ledger(url: str) -> dict[tuple[str, str, int], Row]:
    """Every ledger entry, with the transaction that wrote it (`xmin`)."""
    async with sql(url) as conn:
        rows = await conn.fetch(
            "SELECT kind, object_id, version, event, state, xmin::text AS txn FROM ledger"
        )
    found = {}
    for r in rows:
        state = r["state"] if isinstance(r["state"], dict) else json.loads(r["state"])
        found[(r["kind"], r["object_id"], r["version"])] = {**dict(r), "state": state}
    return found


async def file_records(url: str, path: str) -> set[str]:
    """The records (retired ones too) of the file at `path`: its own and its parts'."""
    async with sql(url) as conn:
        rows = await conn.fetch("SELECT id, properties FROM records WHERE lane = 'notes'")
    held = {r["id"]: dict(json.loads(r["properties"])) for r in rows}
    [file_id] = [p["file_id"] for p in held.values() if p.get("path") == path]
    return {i for i, p in held.items() if p.get("file_id") == file_id}


def touching(rows: list[Row], records: set[str]) -> list[Row]:
    """The entries of those records, and of the edges from or to them."""
    return [
        r
        for r in rows
        if r["object_id"] in records
        or (r["kind"] == "edge" and {r["state"]["from_id"], r["state"]["to_id"]} & records)
    ]


async def test_an_edited_file_and_a_removed_file_are_each_one_transaction(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    gateway = await start_gateway(policy_yaml=POLICY)
    url = gateway.database_url
    folder = write_folder(tmp_path)
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    before = await ledger(url)

    # The Steps section goes (its part is retired, with the edges from it); the Goals
    # link becomes a link to plain.txt (an old edge retired, a new one written).
    edited = RUNBOOK.replace(" and [[00-overview#Goals]]", " and [[plain.txt]]")
    (folder / "01-runbook.md").write_text(edited.split("## Steps")[0])
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    assert "records retired: 1" in out and "written 1 (0 only moved), retired 1" in out, out
    after = await ledger(url)
    new = [r for key, r in after.items() if key not in before]
    mine = touching(new, await file_records(url, "01-runbook.md"))
    shown = sorted((r["kind"], r["event"], r["version"]) for r in mine)
    assert shown == [
        ("edge", "edge_retired", 2),  # the Goals link
        ("edge", "edge_retired", 2),  # the Markdown link of the Steps part, with it
        ("edge", "edge_retired", 2),  # the Steps part's link to the nearest notes, too
        ("edge", "edge_retired", 2),  # the sequence of the two parts, with the second
        ("edge", "edge_upserted", 1),  # the link to plain.txt
        ("record", "sr_retired", 2),  # the Steps part
        ("record", "sr_updated", 2),  # the file's record
        ("record", "sr_updated", 2),  # its first part
    ], shown
    # One transaction wrote them all; the folder's summary, after, is another.
    assert len({r["txn"] for r in mine}) == 1, mine
    assert {r["txn"] for r in new} - {r["txn"] for r in mine}

    # A removed file: its record, its part and every edge from or to them, at once.
    guide = await file_records(url, "sub/guide.md")
    (folder / "sub" / "guide.md").unlink()
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    assert "removed: 1" in out and "records retired: 2" in out, out
    newer = [r for key, r in (await ledger(url)).items() if key not in after]
    gone = touching(newer, guide)
    shown = sorted((r["kind"], r["event"]) for r in gone)
    assert shown == [
        ("edge", "edge_retired"),  # guide -> runbook (its Markdown link)
        ("edge", "edge_retired"),  # guide -> sub/notes.md (their directory's chain)
        ("record", "sr_retired"),
        ("record", "sr_retired"),
    ], shown
    assert len({r["txn"] for r in gone}) == 1, gone


async def test_a_refused_record_leaves_its_whole_file_unwritten_and_the_run_goes_on(
    start_gateway: GatewayFactory,
) -> None:
    first = "---\nstatus: draft\n---\n# A\nxx\n## B\nyy\n## C\nzz\n"
    # Section B moves, section C goes, and the frontmatter gives a value the lane does
    # not allow: the file's record is refused, so none of its parts changes either.
    second = "---\nstatus: done\n---\n# A\nxxxx\n## B\nyy\n"
    assert len(split("a.md", first)) == 4 and len(split("a.md", second)) == 3
    # Metadata (sizes, offsets) is no label: a closed lane need not name it.
    policy = """
lanes:
  notes:
    source_types:
      documentary:
        authority: documentary
        allowed_labels: [folder, folder_id, file_id, path, { label: status, values: [draft] }]
agents:
  writer: { read: [notes], write: [notes] }
"""
    gateway = await start_gateway(policy_yaml=policy)
    token = (await mint(gateway, "writer"))["writer"]
    url = gateway.database_url
    done = await send(
        gateway, token, [{"path": "a.md", "content": first}, {"path": "b.md", "content": "# B\n"}]
    )
    assert done["created"] == ["a.md", "b.md"] and done["refused"] == []
    before = await ledger(url)

    files = [{"path": "a.md", "content": second}, {"path": "b.md", "content": "# B\nmore\n"}]
    done = await send(gateway, token, files)
    [refused] = done["refused"]
    assert refused["path"] == "a.md"
    assert "'status'" in refused["message"] and "['draft']" in refused["message"], refused
    # The run went on: b.md is written; of a.md nothing is, not even its part retired.
    assert done["changed"] == ["b.md"] and done["retired"] == 0, done
    new = [r for key, r in (await ledger(url)).items() if key not in before]
    assert not touching(new, await file_records(url, "a.md")), new
    # b.md's record and its part, in a transaction of their own.
    written = touching(new, await file_records(url, "b.md"))
    assert [r["event"] for r in written] == ["sr_updated", "sr_updated"]
    assert len({r["txn"] for r in written}) == 1


async def test_a_refused_edge_leaves_its_whole_file_unwritten_and_the_run_goes_on(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    gateway = await start_gateway(policy_yaml=POLICY)
    url = gateway.database_url
    folder = write_folder(tmp_path)
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    plain = await file_records(url, "plain.txt")
    async with sql(url) as conn:
        [target] = [
            r["id"]
            for r in await conn.fetch(
                "SELECT id, properties FROM records WHERE id = ANY($1)", plain
            )
            if any(label == "path" for label, _ in json.loads(r["properties"]))
        ]
    # The runbook gains a link to plain.txt; the other notes file changes too.
    (folder / "01-runbook.md").write_text(RUNBOOK.replace("[[notes]]", "[[plain.txt]]"))
    (folder / "other" / "notes.md").write_text("# Notes B\nsecond, edited\n")
    before = await ledger(url)

    async with engine(url) as on:
        retired: list[str] = []

        async def execute(command: Command[Any]) -> Any:
            # Meanwhile an agent retires plain.txt's record, after intake read the folder.
            if not retired:
                retired.append(target)
                await on.executor.execute("curator", RetireRecord(target, "gone"))
            return await on.executor.execute("writer", command)

        report = await Intake(
            FolderSource(folder), "notes", folder.name, "writer", on.policy, on.snapshot, execute
        ).run()

    assert retired == [target]
    [refused] = report.refused
    assert refused.path == "01-runbook.md"
    assert f"record '{target}' was retired" in refused.message, refused
    assert "restoreRecord" in refused.message
    # The run went on with the other file, and nothing of the runbook was written.
    assert report.changed == ["other/notes.md"], report.summary()
    new = [r for key, r in (await ledger(url)).items() if key not in before]
    runbook = await file_records(url, "01-runbook.md")
    assert not [r for r in touching(new, runbook) if r["state"].get("to_id") != target], new
    assert touching(new, await file_records(url, "other/notes.md"))
