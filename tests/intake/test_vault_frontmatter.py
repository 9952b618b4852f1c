"""Frontmatter on a vault's notes: aliases and other keys become properties of the
note's file record (found by a read), a key removed takes its property with it, and a
closed lane refuses the note whose keys it does not allow, naming what it allows."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import GatewayFactory
from tests.intake.test_vault import run
from tests.support import sql

POLICY = """
lanes:
  notes: {}
  closed:
    source_types:
      documentary:
        authority: documentary
        allowed_labels: [folder, folder_id, file_id, path, size, modified, sha256, media_type,
                         part, offset, alias]
agents:
  writer: { read: [notes, closed], write: [notes, closed] }
"""
FORMULAS = """---
title: Formulae and functions
aliases: [Formulae, Calc]
tags: [math]
status: draft
---
# Formulas
"""


async def file_labels(url: str, lane: str) -> dict[str, list[list[str]]]:
    async with sql(url) as conn:
        rows = await conn.fetch(
            "SELECT content, properties FROM records WHERE lane = $1 AND properties::text "
            "LIKE '%\"path\"%'",
            lane,
        )
    return {json.loads(r["content"])["file"]: json.loads(r["properties"]) for r in rows}


async def test_frontmatter_keys_are_properties_a_closed_lane_may_refuse(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    url = (await start_gateway(policy_yaml=POLICY)).database_url
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "Formulas.md").write_text(FORMULAS)
    (folder / "Plain.md").write_text("---\naliases: Simple\n---\nSee [[Formulas]].\n")
    report = await run(url, folder)
    assert not report.refused, report.summary()
    held = await file_labels(url, "notes")
    own = [p for p in held["Formulas.md"] if p[0] in ("alias", "status", "tags")]
    assert own == [["alias", "Formulae"], ["alias", "Calc"], ["status", "draft"]]
    assert ["alias", "Simple"] in held["Plain.md"]
    async with sql(url) as conn:
        # Found by its alias: a read.
        content = await conn.fetchval(
            "SELECT content FROM records WHERE properties @> $1::jsonb",
            json.dumps([["alias", "Calc"]]),
        )
    assert json.loads(content)["title"] == "Formulae and functions"
    # An alias is no link target: the link goes by file name.
    assert not report.unresolved

    # A key removed from the frontmatter takes its property with it; an alias changed
    # replaces the old.
    (folder / "Formulas.md").write_text(
        FORMULAS.replace("status: draft\n", "").replace("[Formulae, Calc]", "[Calc]")
    )
    edited = await run(url, folder)
    assert edited.changed == ["Formulas.md"], edited.summary()
    held = await file_labels(url, "notes")
    assert [p for p in held["Formulas.md"] if p[0] in ("alias", "status")] == [["alias", "Calc"]]

    # A closed lane refuses the note with a key it does not allow, names what it allows,
    # and goes on with the others.
    (folder / "Formulas.md").write_text(FORMULAS)
    closed = await run(url, folder, "closed")
    [refused] = closed.refused
    assert refused.path == "Formulas.md" and "status" in refused.message, refused
    assert "alias" in refused.message, refused
    assert closed.created == ["Plain.md"]
