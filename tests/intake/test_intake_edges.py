"""Detected edges: every one with its detector, confidence and evidence (a quote found
verbatim at its offset, or a rationale); a re-run writes none; an edit retires old
edges as tombstones and writes new ones, visible with includeExpired and asOf."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.conftest import GatewayFactory
from tests.gql._policy_support import mint
from tests.intake._folder import RUNBOOK, write_folder
from tests.intake.test_cli_intake import POLICY, intake, meta, props, records

EDGES = """
query($asOf: DateTime, $includeExpired: Boolean) {
  edges(namespace: "intake", asOf: $asOf, includeExpired: $includeExpired, first: 500) {
    totalCount
    items { id fromId toId type weight confidence detector provenanceType evidence
            validAt invalidAt expiredAt version }
  }
}
"""
EGO = """
query($id: ID!) { ego(nodes: [$id], hops: 1, direction: OUT) {
  edges { type detector evidence toId } } }
"""
Ref = tuple[str, int | None]


async def edges(gateway: Any, token: str, **kw: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await gateway.data(EDGES, kw, token))["edges"]["items"]
    return found


def ends(items: list[dict[str, Any]]) -> dict[str, Ref]:
    """Each record id as the file (part None) or the file's part it stands for."""
    paths = {props(r, "file_id")[0]: props(r, "path")[0] for r in items if props(r, "path")}
    named: dict[str, Ref] = {}
    for r in items:
        if props(r, "path"):
            named[r["id"]] = (props(r, "path")[0], None)
        elif meta(r, "part"):
            named[r["id"]] = (paths[props(r, "file_id")[0]], int(meta(r, "part")[0]))
    return named


def shown(found: list[dict[str, Any]], named: dict[str, Ref]) -> set[tuple[str, Ref, Ref]]:
    return {(e["detector"], named[e["fromId"]], named[e["toId"]]) for e in found}


async def test_detected_edges_with_evidence_and_their_life(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    gateway = await start_gateway(policy_yaml=POLICY)
    token = (await mint(gateway, "curator"))["curator"]
    url = gateway.database_url
    folder = write_folder(tmp_path, tmp_path / "outside")
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    items = await records(gateway, token)
    named = ends(items)
    found = await edges(gateway, token)
    assert shown(found, named) == {
        ("wikilink@1", ("01-runbook.md", 0), ("00-overview.md", None)),
        ("wikilink@1", ("01-runbook.md", 0), ("00-overview.md", 1)),
        ("mdlink@1", ("01-runbook.md", 1), ("sub/guide.md", None)),
        ("mdlink@1", ("sub/guide.md", 0), ("01-runbook.md", None)),
        ("sequence@1", ("00-overview.md", 0), ("00-overview.md", 1)),
        ("sequence@1", ("01-runbook.md", 0), ("01-runbook.md", 1)),
        ("sequence@1", ("00-overview.md", None), ("01-runbook.md", None)),
        ("same_dir@1", ("00-overview.md", None), ("01-runbook.md", None)),
        ("wikilink@1", ("01-runbook.md", 1), ("other/notes.md", None)),
        ("same_dir@1", ("01-runbook.md", None), ("image.png", None)),
        ("same_dir@1", ("image.png", None), ("latin1.txt", None)),
        ("same_dir@1", ("latin1.txt", None), ("plain.txt", None)),
        ("same_dir@1", ("sub/guide.md", None), ("sub/notes.md", None)),
    }
    assert "written 13 (0 only moved), retired 0" in out
    confidence = {"wikilink": 0.95, "mdlink": 0.95, "sequence": 0.99, "same_dir": 0.4}
    for e in found:
        assert e["provenanceType"] == "detected" and e["detector"] == e["type"] + "@1"
        assert e["confidence"] == confidence[e["type"]]
        evidence = e["evidence"]
        if e["type"] in ("wikilink", "mdlink"):
            # The quote is the line, verbatim, and the file from the offset is the link.
            assert set(evidence) == {"quote", "source", "offset"}
            path, _ = named[e["fromId"]]
            assert evidence["source"] == path
            text = (folder / path).read_text()
            at = evidence["offset"]
            start = text.rindex("\n", 0, at) + 1 if "\n" in text[:at] else 0
            line = text[start:].split("\n", 1)[0]
            assert line.strip() == evidence["quote"] and text[at] == "["
            assert text[at:].startswith("[[00-overview") or text[at:].startswith("[")
        else:
            assert set(evidence) == {"rationale", "source"} and "quote" not in evidence
    rationale = {e["evidence"]["rationale"] for e in found if e["type"] == "same_dir"}
    assert "00-overview.md and 01-runbook.md share directory ." in rationale
    overview = ("00-overview.md", None)
    first = next(e for e in found if e["type"] == "wikilink" and named[e["toId"]] == overview)
    assert first["evidence"] == {
        "quote": "See [[00-overview]] for context.",
        "source": "01-runbook.md",
        "offset": RUNBOOK.index("[[00-overview]]"),
    }
    runbook_part = next(i for i, r in named.items() if r == ("01-runbook.md", 0))
    ego = (await gateway.data(EGO, {"id": runbook_part}, token))["ego"]["edges"]
    assert {(x["type"], x["evidence"].get("quote")) for x in ego} >= {
        ("wikilink", "See [[00-overview]] for context."),
    }

    # Nothing changed: no edge written, none retired.
    status, out, err = await intake(url, folder)
    assert "written 0 (0 only moved), retired 0" in out
    assert await edges(gateway, token) == found
    before = datetime.now(UTC).isoformat()

    # An edit: the Goals link goes, a link to plain.txt comes, the later note exists.
    edited = RUNBOOK.replace(" and [[00-overview#Goals]]", " and [[plain.txt]]")
    (folder / "01-runbook.md").write_text(edited)
    (folder / "later-note.md").write_text("# Later\n")
    status, out, err = await intake(url, folder)
    assert status == 0, (out, err)
    items = await records(gateway, token)
    named = ends(items)
    now = shown(await edges(gateway, token), named)
    goals = ("wikilink@1", ("01-runbook.md", 0), ("00-overview.md", 1))
    assert goals not in now
    assert ("wikilink@1", ("01-runbook.md", 0), ("plain.txt", None)) in now
    assert ("wikilink@1", ("01-runbook.md", 1), ("later-note.md", None)) in now
    # The old edge is a tombstone: shown with includeExpired, and as it was asOf before.
    expired = await edges(gateway, token, includeExpired=True)
    [tomb] = [e for e in expired if (e["detector"], named[e["fromId"]], named[e["toId"]]) == goals]
    assert tomb["expiredAt"] is not None and tomb["invalidAt"] is not None
    assert tomb["version"] == 2
    then = shown(await edges(gateway, token, asOf=before), named)
    assert goals in then
    assert ("wikilink@1", ("01-runbook.md", 0), ("plain.txt", None)) not in then
    # An edge whose link did not move is left as it was.
    kept = next(e for e in expired if e["id"] == first["id"])
    assert kept["expiredAt"] is None and kept["version"] == 1
