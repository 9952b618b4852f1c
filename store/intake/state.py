"""What an earlier intake of a folder wrote: its folder record, file records, parts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from store.intake.records import (
    FILE_ID,
    FOLDER,
    FOLDER_ID,
    PART,
    Described,
    described,
    part_index,
    value,
)
from store.kinds.record import queries
from store.kinds.record.model import Record
from store.kinds.record.reads import gather as gather_read
from store.reads.gather_mode import GatherMode
from store.reads.pages import MAX_PAGE
from store.reads.snapshot import Reader
from store.reads.statements import Params
from store.reads.visibility import RULE


@dataclass
class FolderState:
    """A folder as intake last left it (an empty one before its first intake)."""

    folder: Record | None = None
    files: dict[str, Described] = field(default_factory=dict)  # by path

    @property
    def folder_id(self) -> str | None:
        return None if self.folder is None else value(self.folder, FOLDER_ID)


async def members(db: Reader, lanes: Sequence[str], prop: str) -> list[Record]:
    """Every readable record carrying `prop` now, oldest id first."""
    ids: list[str] = []
    after = None
    while True:
        page = await gather_read.gather(
            db, [prop], GatherMode.UNION, lanes, None, MAX_PAGE, after, False
        )
        ids += page.items
        if not page.has_next_page:
            break
        after = page.end_cursor
    found: dict[str, Record] = {}
    for n in range(0, len(ids), MAX_PAGE):
        found |= await queries.records_by_id(db, ids[n : n + MAX_PAGE], lanes)
    return [found[i] for i in ids if i in found]


async def folder_state(db: Reader, lane: str, name: str) -> FolderState:
    """The folder `name` of `lane` and its files as their records describe them."""
    folders = [r for r in await members(db, [lane], f"{FOLDER}:{name}") if value(r, FOLDER_ID)]
    if not folders:
        return FolderState()
    folder = min(folders, key=lambda r: (r.created_at, r.id))
    state = FolderState(folder)
    for record in await members(db, [lane], f"{FOLDER_ID}:{state.folder_id}"):
        found = described(record)
        if found is not None:
            state.files[found.meta.path] = found
    return state


async def parts_of(db: Reader, lane: str, file_id: str) -> dict[int, Record]:
    """A file's part records by index."""
    parts: dict[int, Record] = {}
    for record in await members(db, [lane], f"{FILE_ID}:{file_id}"):
        index = part_index(record)
        if index is not None:
            parts[index] = record
    return parts


_PART_IDS = Params()
# The lane's current `file_id` memberships, each with its record's part index (its
# metadata; of a record an earlier reading wrote, its `part` property).
_PART_IDS_SQL = _PART_IDS.statement(
    f"""SELECT f.value, f.record_id, (
      SELECT x.p->>1 FROM jsonb_array_elements(r.properties) AS x(p)
      WHERE x.p->>0 IN ('{RULE.metadata_prefix}{PART}', '{PART}')
      ORDER BY (x.p->>0) COLLATE "C" LIMIT 1) AS part
    FROM edge_properties f JOIN records r ON r.id = f.record_id
    WHERE {RULE.member("f", _PART_IDS("lanes", "text[]"), None)} AND f.label = '{FILE_ID}'"""
)


async def part_ids(db: Reader, lane: str, file_ids: Sequence[str]) -> dict[tuple[str, int], str]:
    """The record of each part of these files, by (file id, part index), in one read."""
    if not file_ids:
        return {}
    wanted = set(file_ids)
    rows = await db.fetch(_PART_IDS_SQL.text, *_PART_IDS_SQL.args({"lanes": [lane]}))
    return {
        (r["value"], int(r["part"])): r["record_id"]
        for r in rows
        if r["value"] in wanted and r["part"] is not None and r["part"].isdigit()
    }
