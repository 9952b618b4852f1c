"""What a vault's reader meets after intake: bookkeeping is record metadata (never a
hyperedge that gather, labels or traverse see), tags are those its notes' text and
frontmatter state, a note is found by its title or an alias, and a memory written by an
earlier reading has its bookkeeping moved to metadata by the next run, history kept.
Every read is asked on the compiled path and on the resolvers, which must agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from policies.properties import METADATA_PREFIX
from store.intake.parts import split
from store.intake.records import READING, file_content
from store.intake.resolve import FileInfo
from store.kinds.record.commands import Ingest, NewRecord
from tests.conftest import GatewayFactory
from tests.gql._policy_support import mint
from tests.intake._engine import engine
from tests.intake.test_vault import run
from tests.support import Gateway, sql

POLICY = """
lanes:
  notes: {}
agents:
  writer: { read: [notes], write: [notes] }
"""
VAULT = {
    "Home.md": "# Home\nSee [[Formulas#Functions]], [[#Home]] and [x](#anchor). #project\n"
    "```\n#not-in-code\n```\n> ```\n> #not-in-callout-code\n> ```\n"
    "## Later\nA [[Formulas]] link, `#inline` code, #Project again.\n",
    "Formulas.md": "---\ntitle: Formulae and functions\naliases: [Calc, Reckoner]\n"
    "tags: [math, 'area/sub']\n---\n# Formulas\nIntro #draft.\n## Functions\nBack [[Home]].\n",
    "Other.md": "# Other\n## Formulas\nA heading named like a note names nothing.\n",
}
# By the records (sections) holding each: Home's two sections both name #project.
TAGS = {"project": 2, "math": 1, "area/sub": 1, "draft": 1}
BOOKKEEPING = ("part", "offset", "size", "modified", "sha256", "media_type", "title", "format")

LABELS = 'query { labels(lane: "notes") { label recordCount } }'
TAG_COUNTS = 'query { tags(lane: "notes") { tag recordCount } }'
RECORDS = """query($named: String, $tag: String) {
  records(lane: "notes", named: $named, tag: $tag, first: 100) {
    totalCount items { id content properties metadata versions { number properties metadata } }
  }
}"""
GATHER = """query($match: [String!]!) {
  gather(match: $match, mode: UNION) { totalCount items { id } }
}"""
RELATED = """query($id: ID!) {
  related(id: $id) {
    outgoing(first: 100) { totalCount items { detector fromId toId } }
    incoming(first: 100) { totalCount items { detector fromId toId } }
  }
}"""
EGO = """query($id: ID!) {
  ego(nodes: [$id], direction: OUT, types: ["wikilink"]) { edges { fromId toId } neighbors { id } }
}"""
HOP = """query($from: ID!) {
  traverse(from: $from, labels: [], edgeTypes: ["wikilink"], limit: 1000) {
    items { record { id } via edge { id } }
  }
}"""
TRAVERSE_1 = """query($from: ID!) {
  traverse(from: $from, limit: 1000) { items { record { id } via edge { id } } }
}"""
TRAVERSE = """query($from: ID!) {
  traverse(from: $from, depth: 2, limit: 1000) {
    items { record { id } hop via edge { id } }
    notShown
  }
}"""


def write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (root / rel).write_text(text)
    return root


async def both(
    compiled: Gateway, plain: Gateway, token: str, query: str, **variables: Any
) -> dict[str, Any]:
    """The answer of both read paths, which must be the same."""
    answer = await compiled.data(query, variables, token)
    assert await plain.data(query, variables, token) == answer
    return answer


async def test_bookkeeping_is_metadata_tags_come_from_text_and_notes_are_found_by_name(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    compiled = await start_gateway(policy_yaml=POLICY)
    plain = await start_gateway(
        policy_yaml=POLICY, database_url=compiled.database_url, compiled_path=False
    )
    token = (await mint(compiled, "writer"))["writer"]
    report = await run(compiled.database_url, write(tmp_path / "vault", VAULT))
    assert not report.refused, report.summary()

    records = (await both(compiled, plain, token, RECORDS))["records"]["items"]
    files = {json.loads(r["content"])["file"]: r for r in records if r["metadata"].get("sha256")}
    parts = [r for r in records if "part" in r["metadata"]]
    assert sorted(files) == sorted(VAULT) and len(parts) == 7
    for r in records:
        # No bookkeeping among the edge properties, of any version.
        for version in [r, *r["versions"]]:
            assert not [p for p in version["properties"] if p.split(":")[0] in BOOKKEEPING]
            assert not [p for p in version["properties"] if p.startswith(METADATA_PREFIX)]
    home = files["Home.md"]["metadata"]
    assert home["size"] == str(len(VAULT["Home.md"])) and len(home["sha256"]) == 64
    assert (home["title"], home["format"]) == ("Home", "intake/file")
    assert files["Formulas.md"]["metadata"]["title"] == "Formulae and functions"
    for part in parts:
        [file_id] = [p for p in part["properties"] if p.startswith("file_id:")]
        [owner] = [f for f in files.values() if file_id in f["properties"]]
        text = VAULT[json.loads(owner["content"])["file"]]
        assert text[int(part["metadata"]["offset"]) :].startswith(part["content"])

    # Never a hyperedge: labels lists none of it, gather matches none of it.
    labels = {x["label"] for x in (await both(compiled, plain, token, LABELS))["labels"]}
    assert labels == {"folder", "folder_id", "file_id", "path", "alias"}
    for match in (["part:0"], ["offset:0"], [f"{METADATA_PREFIX}part:0"], ["size:10"]):
        assert (await both(compiled, plain, token, GATHER, match=match))["gather"] == {
            "totalCount": 0,
            "items": [],
        }
    # A walk from a note's first section goes by its file and folder (and by the typed
    # edges intake detected), never by a position shared with other notes' first sections.
    [first] = [p for p in parts if p["content"].startswith("# Home")]
    walk = (await both(compiled, plain, token, TRAVERSE, **{"from": first["id"]}))["traverse"]
    by_value = {i["via"].split(":")[0] for i in walk["items"] if i["edge"] is None}
    assert by_value <= {"file_id", "folder_id"}

    # A note's record speaks for the note: its links are its sections' links to other
    # notes (not one of them, and not the steps from one section to the next).
    home_id, formulas_id = files["Home.md"]["id"], files["Formulas.md"]["id"]
    note = {home_id} | {p["id"] for p in parts if p["content"] in VAULT["Home.md"]}
    formulas = {formulas_id} | {
        p["id"] for p in parts if p["content"] in VAULT["Formulas.md"] and p["id"] not in note
    }
    related = (await both(compiled, plain, token, RELATED, id=home_id))["related"]
    out = related["outgoing"]["items"]
    assert all(e["fromId"] in note and e["toId"] not in note for e in out), out
    # Both sections' links to Formulas (its section, its record), the next file in the
    # directory; no self-link, no step from one section to the next.
    assert sorted((e["detector"], e["toId"] in formulas) for e in out) == [
        ("same_dir@1", False),
        ("wikilink@1", True),
        ("wikilink@1", True),
    ]
    assert related["outgoing"]["totalCount"] == 3
    into = related["incoming"]["items"]
    assert all(e["toId"] in note and e["fromId"] in formulas for e in into), into
    assert sorted(e["detector"] for e in into) == ["same_dir@1", "wikilink@1"]
    ego = (await compiled.data(EGO, {"id": home_id}, token))["ego"]
    assert {n["id"] for n in ego["neighbors"]} <= formulas and len(ego["edges"]) == 2

    # One hop from the note's record walks the note's links, those its sections make and
    # those made to it, as `related` lists them; never a typed edge from one of its
    # sections to another.
    hop = (await both(compiled, plain, token, HOP, **{"from": home_id}))["traverse"]
    reached = {i["record"]["id"] for i in hop["items"]}
    ends = {e["toId"] for e in out if e["detector"].startswith("wikilink")}
    ends |= {e["fromId"] for e in into if e["detector"].startswith("wikilink")}
    assert reached == ends and ends <= formulas and len(ends) >= 2, (reached, ends)
    assert {i["via"] for i in hop["items"]} == {"wikilink"}
    # Its sections are reached by the file they share, as before.
    hop = (await both(compiled, plain, token, TRAVERSE_1, **{"from": home_id}))["traverse"]
    by_file = {i["record"]["id"] for i in hop["items"] if i["via"].startswith("file_id:")}
    assert by_file == note - {home_id}

    # Tags are the text's and the frontmatter's: none from a link's heading, code, or the
    # copies of link lines in the file records.
    tags = (await both(compiled, plain, token, TAG_COUNTS))["tags"]
    assert {t["tag"]: t["recordCount"] for t in tags} == TAGS
    tagged = await both(compiled, plain, token, RECORDS, tag="#Project")
    assert sorted(r["content"][:7] for r in tagged["records"]["items"]) == ["# Home\n", "## Late"]

    # Found by title or alias, in any case; a heading is no name.
    for name, found in (
        ("formulae AND functions", ["Formulas.md"]),
        ("calc", ["Formulas.md"]),
        (" RECKONER ", ["Formulas.md"]),
        ("home", ["Home.md"]),
        ("Functions", []),
        ("Other", ["Other.md"]),
    ):
        page = (await both(compiled, plain, token, RECORDS, named=name))["records"]
        assert [json.loads(r["content"])["file"] for r in page["items"]] == found, name
        assert page["totalCount"] == len(found)
    page = await both(compiled, plain, token, RECORDS, named="calc", tag="math")
    assert page["records"]["totalCount"] == 0  # the file record holds no tag: its part does


async def test_a_memory_of_an_earlier_reading_moves_its_bookkeeping_to_metadata(
    start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    gateway = await start_gateway(policy_yaml=POLICY)
    url = gateway.database_url
    token = (await mint(gateway, "writer"))["writer"]
    folder = write(tmp_path / "vault", VAULT)
    # What an earlier reading wrote: bookkeeping as edge properties.
    async with engine(url) as on:
        [[record]] = (
            await on.executor.execute(
                "writer",
                Ingest(
                    (
                        NewRecord(
                            json.dumps({"folder": "vault"}),
                            ("folder:vault", "folder_id:fo_old"),
                            "documentary",
                            "notes",
                        ),
                    )
                ),
            ),
        )
        for n, (rel, text) in enumerate(sorted(VAULT.items())):
            parts = split(rel, text)
            body = json.loads(file_content(FileInfo(rel, rel, ()), len(parts), ()))
            body["reading"] = READING - 1
            size = len((folder / rel).read_bytes())
            file_props = (
                "folder_id:fo_old",
                f"file_id:fi_{n}",
                f"path:{rel}",
                f"size:{size}",
                "sha256:" + "0" * 64,
            )
            inputs = [NewRecord(json.dumps(body), file_props, "documentary", "notes")]
            inputs += [
                NewRecord(
                    p.text,
                    (f"file_id:fi_{n}", f"part:{p.index}", f"offset:{p.start}"),
                    "documentary",
                    "notes",
                )
                for p in parts
            ]
            await on.executor.execute("writer", Ingest(tuple(inputs)))
    async with sql(url) as conn:
        before = {
            r["id"]: r["version"] for r in await conn.fetch("SELECT id, version FROM records")
        }
    labels = {x["label"] for x in (await gateway.data(LABELS, {}, token))["labels"]}
    assert {"part", "offset", "size", "sha256"} <= labels

    report = await run(url, folder)
    assert sorted(report.changed) == sorted(VAULT) and not report.created, report.summary()
    labels = {x["label"] for x in (await gateway.data(LABELS, {}, token))["labels"]}
    assert labels == {"folder", "folder_id", "file_id", "path", "alias"}
    records = (await gateway.data(RECORDS, {}, token))["records"]["items"]
    # The same records, each with new versions; the old ones keep what they held.
    assert {r["id"] for r in records} == set(before)
    for r in records:
        if r["id"] == record.id:
            continue
        assert len(r["versions"]) > before[r["id"]]
        assert not [p for p in r["properties"] if p.split(":")[0] in BOOKKEEPING]
        first = r["versions"][0]
        assert first["metadata"] == {}
        assert [p for p in first["properties"] if p.split(":")[0] in ("part", "size")]
        assert {"part", "offset"} <= set(r["metadata"]) or {"size", "sha256"} <= set(r["metadata"])
    again = await run(url, folder)
    assert again.records_written == 0 and again.not_read == len(VAULT), again.summary()
