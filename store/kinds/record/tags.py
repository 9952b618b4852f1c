"""Tags: `#word`s in a record's content, indexed when the content is written.

Tags are not in the ledger; they are an index over the content. The rule that finds
them (`tags_of`) is pure and is run by the write path on each new version and by
`verify` over the replayed records, so the `record_tags` projection is rebuilt from
content alone. A tag is never an edge property: it is read by `tags(lane)` and
`records(tag:)` only.

A tag is `#` followed by a letter, then letters, digits, `_`, `-` or `/`, where the
`#` does not follow a word character, `#`, `&` or `/` (so `page#part`, `##`, `&#38;`
and URL fragments are not tags) and lies outside code (fenced blocks and backtick
spans). Tags compare case-insensitively and are kept in lower case.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from store.kinds.record.model import Record
from store.ledger.registry import Cte, Rows, Table
from store.ledger.report import Report
from store.pool import Conn
from store.reads.snapshot import Reader
from store.reads.statements import Params, Statement
from store.reads.visibility import RULE

MAX_TAG_CHARS = 100
# A record may hold many; each is listed once.
_TAG = re.compile(r"(?<![\w#&/])#([^\W\d_][\w/-]*)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")

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
    fenced = False
    for line in content.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or "#" not in line:
            continue
        for match in _TAG.finditer(_INLINE_CODE.sub(" ", line)):
            tag = match.group(1).rstrip("-/").lower()
            if tag and len(tag) <= MAX_TAG_CHARS:
                found.add(tag)
    return tuple(sorted(found))


def moved(before: Record | None, after: Record) -> dict[str, Any] | None:
    """The record_tags row a new version writes, or None when its tags (and lane) stay."""
    same_lane = before is not None and before.lane == after.lane
    if same_lane and before is not None and before.state.content == after.state.content:
        return None
    now = tags_of(after.state.content)
    held = () if before is None else tags_of(before.state.content)
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
    now = tags_of(record.state.content)
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
