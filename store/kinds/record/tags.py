"""Tags: the `#word`s a person wrote in a record's content, indexed when it is written.

Tags are not in the ledger; they are an index over the content. The rule that finds
them (`tags_of`) is pure and is run by the write path on each new version and by
`verify` over the replayed records, so the `record_tags` projection is rebuilt from
content alone. A tag is never an edge property: it is read by `tags(lane)` and
`records(tag:)` only.

A tag is `#` followed by a letter, then letters, digits, `_`, `-` or `/`, where the
`#` does not follow a word character, `#`, `&` or `/` (so `page#part`, `##`, `&#38;`
and URL fragments are not tags) and lies outside code (fenced blocks, also inside a
callout or block quote, and backtick spans) and outside links (`[[note#heading]]`,
`[text](#anchor)`: a heading named in a link is no tag). Content that opens with a
frontmatter block (YAML between `---` lines) has the tags its `tags` (or `tag`) key
lists, and no `#` inside the block is read. A record whose metadata names the `format`
of its content holds what the engine wrote (intake's JSON of a file, with copies of
its links' lines), no person's text: it has no tags. Tags compare case-insensitively
and are kept in lower case.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import yaml

from store.kinds.record.model import Record
from store.ledger.registry import Cte, Rows, Table
from store.ledger.report import Report
from store.pool import Conn
from store.reads.snapshot import Reader
from store.reads.statements import Params, Statement
from store.reads.visibility import RULE

MAX_TAG_CHARS = 100
# The metadata key naming the format of content the engine wrote.
FORMAT = "format"
# A record may hold many; each is listed once.
_TAG = re.compile(r"(?<![\w#&/])#([^\W\d_][\w/-]*)")
_A_TAG = re.compile(r"#?([^\W\d_][\w/-]*)")
_FENCE = re.compile(r"^(?: {0,3}> ?)*\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[\[[^\]\n]*\]\]|\[[^\[\]\n]*\]\([^()\n]*\)")
_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?\r?\n)?(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL)

TABLE = Table("record_tags", ("record_id", "lane", "tags"))
# Every record whose content ever held a tag has a row (empty when it holds none now).
CTE = Cte(
    "moved_tags",
    """INSERT INTO record_tags AS t (record_id, lane, tags)
  SELECT record_id, lane, tags FROM {rows}
  ON CONFLICT (record_id) DO UPDATE SET lane = EXCLUDED.lane, tags = EXCLUDED.tags""",
    (("record_id", "text"), ("lane", "text"), ("tags", "text[]")),
)

_LIVE = "SELECT record_id, lane, tags FROM record_tags WHERE cardinality(tags) > 0"


def normal_tag(text: str) -> str:
    """A tag as it is kept: without its `#`, in lower case."""
    return text.strip().removeprefix("#").lower()


def tags_of(content: str) -> tuple[str, ...]:
    """The distinct tags of `content`, sorted."""
    found: set[str] = set()
    front = _FRONTMATTER.match(content)
    if front is not None:
        found.update(_listed_tags(front.group(1) or ""))
        content = content[front.end() :]
    fenced = False
    for line in content.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or "#" not in line:
            continue
        for match in _TAG.finditer(_LINK.sub(" ", _INLINE_CODE.sub(" ", line))):
            _keep(match.group(1), found)
    return tuple(sorted(found))


def record_tags(record: Record) -> tuple[str, ...]:
    """The tags of a record: none for content the engine wrote."""
    if FORMAT in record.state.metadata:
        return ()
    return tags_of(record.state.content)


def _keep(tag: str, found: set[str]) -> None:
    tag = tag.rstrip("-/").lower()
    if tag and len(tag) <= MAX_TAG_CHARS:
        found.add(tag)


def _listed_tags(block: str) -> set[str]:
    """The tags a frontmatter's `tags` (or `tag`) key lists: a list, or one text of
    tags apart by commas or spaces."""
    try:
        body = yaml.safe_load(block)
    except yaml.YAMLError:
        return set()
    if not isinstance(body, dict):
        return set()
    found: set[str] = set()
    for key, raw in body.items():
        if str(key).strip().casefold() not in ("tags", "tag"):
            continue
        items = raw if isinstance(raw, list) else [raw]
        for item in items:
            if not isinstance(item, str):
                continue
            for word in re.split(r"[,\s]+", item):
                match = _A_TAG.fullmatch(word.strip())
                if match is not None:
                    _keep(match.group(1), found)
    return found


def moved(before: Record | None, after: Record) -> dict[str, Any] | None:
    """The record_tags row a new version writes, or None when its tags (and lane) stay."""
    same_lane = before is not None and before.lane == after.lane
    if (
        same_lane
        and before is not None
        and before.state.content == after.state.content
        and (FORMAT in before.state.metadata) == (FORMAT in after.state.metadata)
    ):
        return None
    now = record_tags(after)
    held = () if before is None else record_tags(before)
    if (not now and not held) or (now == held and same_lane):
        return None
    return {"record_id": after.id, "lane": after.lane, "tags": list(now)}


@dataclass(frozen=True)
class TagRow:
    record_id: str
    lane: str
    tags: tuple[str, ...]


def replayed(record: Record) -> TagRow | None:
    """The row a replayed record projects to (none without tags)."""
    now = record_tags(record)
    return TagRow(record.id, record.lane, now) if now else None


def rows_of(record: Record) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """Replay's rows for import: a row for a record that holds tags now."""
    row = replayed(record)
    if row is not None:
        yield TABLE.name, (row.record_id, row.lane, list(row.tags))


def add(before: Record | None, after: Record, rows: Rows) -> None:
    """The write path: the row this version moves, if any."""
    row = moved(before, after)
    if row is not None:
        rows.part(CTE.name).append(row)


async def compare(conn: Conn, records: Mapping[str, Record], report: Report) -> None:
    """verify: the live index against the tags of the replayed records' content."""
    expected = {r.record_id: r for r in map(replayed, records.values()) if r is not None}
    live: dict[str, asyncpg.Record] = {}
    async for found in conn.cursor(_LIVE, prefetch=2000):
        live[found["record_id"]] = found
    for record_id in sorted(expected.keys() | live.keys()):
        want = expected.get(record_id)
        row = live.get(record_id)
        have = None if row is None else TagRow(record_id, row["lane"], tuple(row["tags"]))
        if have != want:
            report.problems.append(
                f"{record_id}: tags {_listed(have)} indexed, its content has {_listed(want)}"
            )


def _listed(row: TagRow | None) -> str:
    tags: Sequence[str] = () if row is None else row.tags
    return "[" + ", ".join(f"#{t}" for t in tags) + "]" if tags else "none"


# -- reads ----------------------------------------------------------------------


def tagged(r: str, tag: str) -> str:
    """SQL: the record aliased `r` holds the tag `tag` (a placeholder) now."""
    return (
        f"EXISTS (SELECT 1 FROM record_tags g WHERE g.record_id = {r}.id "
        f"AND g.tags @> ARRAY[{tag}]::text[])"
    )


@dataclass(frozen=True)
class TagCount:
    tag: str
    record_count: int


def _counts() -> Statement:
    p = Params()
    lanes = p("lanes", "text[]")
    return p.statement(
        f"""SELECT x.tag, count(*)::bigint AS n FROM record_tags t
        JOIN records r ON r.id = t.record_id
        CROSS JOIN LATERAL unnest(t.tags) AS x(tag)
        WHERE {RULE.lane("t", lanes)} AND {RULE.record("r", lanes)}
        GROUP BY x.tag ORDER BY n DESC, x.tag"""
    )


_COUNTS = _counts()


async def tag_counts(db: Reader, lanes: Sequence[str], lane: str | None) -> list[TagCount]:
    """Tags in the current content of readable records, with how many records hold each."""
    chosen = RULE.chosen(lanes, None if lane is None else [lane])
    if not chosen:
        return []
    rows = await db.fetch(_COUNTS.text, *_COUNTS.args({"lanes": chosen}))
    return [TagCount(row["tag"], int(row["n"])) for row in rows]


def tagged_count(lanes: str, tag: str, source_type: str | None = None) -> str:
    """SQL: how many readable records of `lanes` hold `tag` now (of `source_type` if
    given): counted from the tag index, which keeps no count."""
    kind = "" if source_type is None else f" AND r.source_type = {source_type}"
    return (
        f"SELECT count(*) FROM record_tags g JOIN records r ON r.id = g.record_id "
        f"WHERE {RULE.lane('g', lanes)} AND g.tags @> ARRAY[{tag}]::text[] "
        f"AND {RULE.record('r', lanes)}{kind}"
    )
