"""The typed-edge kind: a relation between two records that someone asserted or a
detector found, with who said it, how sure, the evidence, and when it held.

An edge (id `edge_` + 32 hex) is a ledgered object: each upsert, retirement and
resolution is a new entry holding its whole state, and `edges` is its projection, one
row per edge as its newest entry leaves it. Reading an edge as it was at T reads the
ledger instead (`store.kinds.edge.queries`): the newest entry of each edge written by T,
so what was recorded after T stays unseen, and the validity of that state (`valid_at
<= T < invalid_at`) decides whether it held then. No second history table to keep in
step: the entries are the history, and `verify` checks them.

A past read stays an index lookup however long the ledger grows: the projection keeps
every edge ever made (retiring one is a new version, never a delete) and an edge's key
`(from_id, to_id, type, namespace)` is the same in all its versions, so the read finds
its edges on the projection's indexes by those columns and then each edge's entry as of
T on the ledger's `(kind, object_id, version)` index, newest version first. Its cost is
the edges it reads (and their versions written after T), never the kind's entries.

Its unique key `live` is `(from_id, to_id, type, namespace)` among edges not retired;
an upsert locks it (`Locks.keys`), so two upserts of one key make one edge.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.kinds.edge.model import COLUMNS, EVENT_KINDS, LIVE_KEY, Edge
from store.kinds.edge.payloads import payload_for
from store.kinds.record.locks import RecordsRead
from store.ledger.command import Current, Txn, Write
from store.ledger.entry import Entry
from store.ledger.implied import Implied, Links, Shared
from store.ledger.registry import Cte, KindDefaults, NewestRowReplay, RowWriter, Table
from store.pool import Conn

NAME = "edge"

_TYPED = (
    ("id", "text"),
    ("from_id", "text"),
    ("to_id", "text"),
    ("type", "text"),
    ("namespace", "text"),
    ("lane", "text"),
    ("to_lane", "text"),
    ("weight", "float8"),
    ("confidence", "float8"),
    ("provenance_actor", "text"),
    ("provenance_type", "text"),
    ("evidence", "jsonb"),
    ("detector", "text"),
    ("conflict_state", "text"),
    ("resolution", "text"),
    ("resolver", "text"),
    ("winner_id", "text"),
    ("valid_at", "timestamptz"),
    ("invalid_at", "timestamptz"),
    ("expired_at", "timestamptz"),
    ("created_at", "timestamptz"),
    ("updated_at", "timestamptz"),
    ("version", "int"),
    ("ledger_hash", "text"),
)
assert tuple(c for c, _ in _TYPED) == COLUMNS
_NAMES = ", ".join(COLUMNS)
_MOVED = ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS if c not in ("id", "created_at"))
_UPSERT = (
    f"INSERT INTO edges ({_NAMES})\n  SELECT {_NAMES} FROM {{rows}}\n"
    f"  ON CONFLICT (id) DO UPDATE SET {_MOVED}"
)
# The live edges to or from some records: what retiring a record retires with it.
_ATTACHED = """
SELECT id FROM edges
WHERE (from_id = ANY($1::text[]) OR to_id = ANY($1::text[])) AND expired_at IS NULL
ORDER BY id
"""
_EVER_ATTACHED = """
SELECT id FROM edges WHERE from_id = ANY($1::text[]) OR to_id = ANY($1::text[]) ORDER BY id
"""
_HOLDER = """
SELECT id FROM edges
WHERE from_id = $1 AND to_id = $2 AND type = $3 AND namespace = $4 AND expired_at IS NULL
"""


@dataclass(frozen=True)
class EdgeKind(KindDefaults):
    name: str = NAME
    prefix: str = "edge_"
    ctes: tuple[Cte, ...] = (Cte("moved_edges", _UPSERT, _TYPED),)
    tables: tuple[Table, ...] = (Table("edges", COLUMNS),)
    event_kinds: tuple[str, ...] = EVENT_KINDS
    unique_keys: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {LIVE_KEY: ("from_id", "to_id", "type", "namespace")}
    )

    def writer(self, before: Mapping[str, Any]) -> RowWriter:
        return RowWriter(Edge.from_entry, "moved_edges")

    def replay(self, keep: bool) -> NewestRowReplay:
        return NewestRowReplay(keep, "edge", self.tables[0], Edge.from_entry, Edge.from_row)

    def implied(
        self, before: Mapping[str, Any] | None, entry: Entry, links: Links
    ) -> tuple[Shared, list[Implied]] | str:
        s = entry.state
        previous = None if entry.version == 1 else entry.version - 1
        payload = payload_for(entry.event, before, s, entry.object_id)
        if payload is None:
            return f"ledger event '{entry.event}' is no edge event"
        return Shared(s["from_id"], s["lane"], previous), [Implied(entry.event, payload)]

    def retired_with(
        self, txn: Txn, current: Current[RecordsRead], object_id: str, records: Collection[str]
    ) -> Write | None:
        from store.kinds.edge.commands import retired_with_record

        return retired_with_record(txn, current, object_id, records)

    async def attached(self, conn: Conn, record_ids: Sequence[str]) -> list[str]:
        rows = await conn.fetch(_ATTACHED, list(record_ids))
        return [row["id"] for row in rows]

    async def ever_attached(self, conn: Conn, record_ids: Sequence[str]) -> list[str]:
        rows = await conn.fetch(_EVER_ATTACHED, list(record_ids))
        return [row["id"] for row in rows]

    def erased(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        # Its evidence quotes the records it joins (a line of one that names the other).
        return None if state.get("evidence") is None else {**state, "evidence": None}

    def erased_rows(self) -> str | None:
        return "UPDATE edges SET evidence = NULL WHERE id = ANY($1::text[])"

    async def holder(self, conn: Conn, key: str, values: tuple[str, ...]) -> str | None:
        if key != LIVE_KEY:
            return None
        found: str | None = await conn.fetchval(_HOLDER, *values)
        return found


KIND = EdgeKind()
