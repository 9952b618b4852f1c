"""The record kind: a source record, its edge-property memberships and label counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from store.ids import RECORD_KIND
from store.kinds.record import tags, vectors, word_counts, words
from store.kinds.record.counts import (
    CLOSED,
    LABEL_DELTAS,
    MEMBER_DELTAS,
    OPENED,
    RECORD_DELTAS,
    CountsFold,
)
from store.kinds.record.events import (
    ASSERTED_EVENT_KINDS,
    RECORD_EVENT_KINDS,
    RecordLinks,
    record_implied,
)
from store.kinds.record.locks import RecordLocks
from store.kinds.record.model import Record
from store.kinds.record.projection import (
    RECORD_COLUMNS,
    Membership,
    label_changes,
    member_changes,
    project_record,
    record_changes,
    record_row,
)
from store.ledger.command import Write
from store.ledger.entry import Entry
from store.ledger.implied import Implied, Links, Shared
from store.ledger.registry import Copy, Cte, KindDefaults, Rows, Table
from store.ledger.report import Report
from store.pool import Conn

NAME = RECORD_KIND

_MEMBERSHIP_COLUMNS = (
    "id",
    "record_id",
    "lane",
    "label",
    "value",
    "recorded_from",
    "recorded_to",
    "from_version",
    "to_version",
)

_CTES = (
    Cte(
        "moved_records",
        """INSERT INTO records AS r (id, lane, source_type, authority, content, properties,
                          version, created_at, updated_at, created_by, idempotency_key,
                          ledger_hash, retired_at, retired_by, retired_reason, expires_at)
  SELECT id, lane, source_type, authority, content, properties, version, created_at,
         updated_at, created_by, idempotency_key, ledger_hash, retired_at, retired_by,
         retired_reason, expires_at
  FROM {rows}
  ON CONFLICT (id) DO UPDATE SET
    lane = EXCLUDED.lane, source_type = EXCLUDED.source_type, authority = EXCLUDED.authority,
    content = EXCLUDED.content, properties = EXCLUDED.properties, version = EXCLUDED.version,
    updated_at = EXCLUDED.updated_at, ledger_hash = EXCLUDED.ledger_hash,
    retired_at = EXCLUDED.retired_at, retired_by = EXCLUDED.retired_by,
    retired_reason = EXCLUDED.retired_reason, expires_at = EXCLUDED.expires_at""",
        (
            ("id", "text"),
            ("lane", "text"),
            ("source_type", "text"),
            ("authority", "text"),
            ("content", "text"),
            ("properties", "jsonb"),
            ("version", "int"),
            ("created_at", "timestamptz"),
            ("updated_at", "timestamptz"),
            ("created_by", "text"),
            ("idempotency_key", "text"),
            ("ledger_hash", "text"),
            ("retired_at", "timestamptz"),
            ("retired_by", "text"),
            ("retired_reason", "text"),
            ("expires_at", "timestamptz"),
        ),
    ),
    Cte(
        CLOSED,
        """UPDATE edge_properties m SET recorded_to = x.at, to_version = x.version
  FROM {rows}
  WHERE m.record_id = x.record_id AND m.id = x.id AND m.recorded_to IS NULL
  RETURNING m.lane, m.label, m.value_key, m.value""",
        (("id", "text"), ("record_id", "text"), ("at", "timestamptz"), ("version", "int")),
    ),
    Cte(
        OPENED,
        """INSERT INTO edge_properties (id, record_id, lane, label, value, recorded_from,
                               recorded_to, from_version, to_version)
  SELECT id, record_id, lane, label, value, recorded_from, NULL, from_version, NULL
  FROM {rows}
  RETURNING lane, label, value_key, value""",
        (
            ("id", "text"),
            ("record_id", "text"),
            ("lane", "text"),
            ("label", "text"),
            ("value", "text"),
            ("recorded_from", "timestamptz"),
            ("from_version", "int"),
        ),
    ),
    Cte(
        LABEL_DELTAS,
        "INSERT INTO label_deltas (lane, label, delta)\n  SELECT lane, label, delta FROM {rows}",
        (("lane", "text"), ("label", "text"), ("delta", "int")),
    ),
    Cte(
        RECORD_DELTAS,
        "INSERT INTO record_deltas (lane, source_type, delta)\n"
        "  SELECT lane, source_type, delta FROM {rows}",
        (("lane", "text"), ("source_type", "text"), ("delta", "int")),
    ),
    # Read off the memberships this statement closes and opens, as they were written:
    # one row per value whose count moved, and nothing for the write path to send. (The
    # value's key is a function of the value: grouped by both, no aggregate picks one.)
    Cte(
        MEMBER_DELTAS,
        f"""INSERT INTO member_deltas (value_hash, label, lane, value, delta)
  SELECT edgeloom_member_hash(label, value_key), label, lane, value, sum(d) FROM (
    SELECT lane, label, value_key, value, 1 AS d FROM {OPENED}
    UNION ALL SELECT lane, label, value_key, value, -1 FROM {CLOSED}
  ) m
  GROUP BY label, value_key, lane, value HAVING sum(d) <> 0""",
    ),
    tags.CTE,
    *words.CTES,
    word_counts.DELTAS,
    *vectors.CTES,
)

_RECORDS = """
SELECT id, lane, source_type, authority, content, properties, version, created_at, updated_at,
       created_by, ledger_hash, retired_at, retired_by, retired_reason, expires_at
FROM records
"""
_MEMBERSHIPS = """
SELECT id, record_id, lane, label, value, recorded_from, from_version, recorded_to, to_version
FROM edge_properties
"""
_LABEL_COUNTS = """
SELECT lane, label, sum(n)::bigint AS n FROM (
  SELECT lane, label, records AS n FROM label_counts
  UNION ALL SELECT lane, label, delta FROM label_deltas
) c GROUP BY lane, label HAVING sum(n) <> 0
"""
_RECORD_COUNTS = """
SELECT lane, source_type, sum(n)::bigint AS n FROM (
  SELECT lane, source_type, records AS n FROM record_counts
  UNION ALL SELECT lane, source_type, delta FROM record_deltas
) c GROUP BY lane, source_type HAVING sum(n) <> 0
"""
_MEMBER_COUNTS = """
SELECT lane, label, min(value) AS value, sum(n)::bigint AS n FROM (
  SELECT lane, label, value_key, value, records AS n FROM member_counts
  UNION ALL SELECT lane, label, edgeloom_value_key(value), value, delta FROM member_deltas
) c GROUP BY lane, label, value_key HAVING sum(n) <> 0
"""
_INSERT_MEMBER_COUNTS = """
INSERT INTO member_counts (label, value_key, lane, value, records)
SELECT label, edgeloom_value_key(value), lane, value, n
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS u(lane, label, value, n)
"""
_COMPARED = RECORD_COLUMNS[1:]  # every column but the id compared on


_LOCKS = RecordLocks()
_FOLD = CountsFold()


class _Writer:
    def __init__(self, before: Mapping[str, Record]) -> None:
        self.before = before
        self.written: dict[str, Record] = {}
        # One delta row per (lane, label) a command moves, however many records it wrote;
        # so too per (lane, source type). The member deltas are the statement's own.
        self.labels: Counter[tuple[str, str]] = Counter()
        self.records: Counter[tuple[str, str]] = Counter()
        self.words = words.writer()
        self.vectors = vectors.writer()

    def add(self, write: Write, entry: Entry, rows: Rows) -> Record:
        was = self.written.get(write.object_id, self.before.get(write.object_id))
        delta = project_record(was, entry)
        label_changes(was, delta.record, self.labels)
        record_changes(was, delta.record, self.records)
        self.written[entry.object_id] = delta.record
        rows.part("moved_records").append(record_row(delta.record, write.idempotency_key))
        rows.part(CLOSED).extend(
            {"id": ep, "record_id": entry.object_id, "at": entry.at, "version": entry.version}
            for ep in delta.closed
        )
        rows.part(OPENED).extend(m.row() for m in delta.opened)
        tags.add(was, delta.record, rows)
        self.words.add(was, delta.record, rows)
        self.vectors.add(was, delta.record, rows)
        return delta.record

    def finish(self, rows: Rows) -> None:
        labels = [{"lane": ln, "label": lb, "delta": n} for (ln, lb), n in self.labels.items() if n]
        if labels:
            rows.part(LABEL_DELTAS).extend(labels)
        records = [
            {"lane": ln, "source_type": st, "delta": n} for (ln, st), n in self.records.items() if n
        ]
        if records:
            rows.part(RECORD_DELTAS).extend(records)


class _Replay:
    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.records: dict[str, Record] = {}
        self.memberships: set[Membership] = set()
        self.labels: Counter[tuple[str, str]] = Counter()
        self.counted: Counter[tuple[str, str]] = Counter()
        self.members: Counter[tuple[str, str, str]] = Counter()
        # Written after the copied rows (import): their words come from the ledger.
        self.words: list[words.Interval] = []
        self.vectors: list[words.Interval] = []

    def object(self, entries: Sequence[Entry]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        record: Record | None = None
        opened: dict[str, Membership] = {}
        versions: list[Record] = []
        for entry in entries:
            delta = project_record(record, entry)
            versions.append(delta.record)
            label_changes(record, delta.record, self.labels)
            record_changes(record, delta.record, self.counted)
            member_changes(record, delta, self.members)
            record = delta.record
            for ep_id in delta.closed:
                was = opened.pop(ep_id)
                closed = Membership(
                    **{**was.row(), "recorded_to": entry.at, "to_version": entry.version}
                )
                yield self._membership(closed)
            opened.update((m.id, m) for m in delta.opened)
        assert record is not None
        self.words.extend(words.intervals(versions))
        self.vectors.extend(vectors.intervals(versions))
        for m in opened.values():
            yield self._membership(m)
        if self.keep:
            self.records[record.id] = record
        row = record_row(record)
        yield "records", tuple(row[c] for c in RECORD_COLUMNS)
        yield from tags.rows_of(record)

    def _membership(self, m: Membership) -> tuple[str, tuple[Any, ...]]:
        if self.keep:
            self.memberships.add(m)
        row = m.row()
        return "edge_properties", tuple(row[c] for c in _MEMBERSHIP_COLUMNS)

    async def compare(self, conn: Conn, report: Report) -> None:
        await self._compare_records(conn, report)
        await self._compare_memberships(conn, report)
        await self._compare_label_counts(conn, report)
        await self._compare_record_counts(conn, report)
        await self._compare_member_counts(conn, report)
        await tags.compare(conn, self.records, report)
        await words.compare(conn, self.words, report)
        await word_counts.compare(conn, report)
        await vectors.compare(conn, self.vectors, report)

    async def _compare_records(self, conn: Conn, report: Report) -> None:
        live: dict[str, asyncpg.Record] = {}
        async for row in conn.cursor(_RECORDS, prefetch=2000):
            live[row["id"]] = row
        report.records = len(live)
        rebuilt = self.records
        for record_id in sorted(rebuilt.keys() - live.keys()):
            report.problems.append(f"{record_id}: in the ledger but missing from records")
        for record_id in sorted(live.keys() - rebuilt.keys()):
            report.problems.append(f"{record_id}: in records but has no ledger entry")
        for record_id in sorted(rebuilt.keys() & live.keys()):
            expected = record_row(rebuilt[record_id])
            for column in _COMPARED:
                if live[record_id][column] != expected[column]:
                    report.problems.append(f"{record_id}: records.{column} differs from the ledger")

    async def _compare_memberships(self, conn: Conn, report: Report) -> None:
        live: set[Membership] = set()
        async for row in conn.cursor(_MEMBERSHIPS, prefetch=5000):
            live.add(Membership(**dict(row)))
        report.memberships = len(live)
        for m in sorted(self.memberships - live, key=str)[:50]:
            report.problems.append(
                f"{m.record_id}: membership {m.label}:{m.value} missing from the projection"
            )
        for m in sorted(live - self.memberships, key=str)[:50]:
            report.problems.append(
                f"{m.record_id}: membership {m.label}:{m.value} not in the ledger"
            )

    async def _compare_label_counts(self, conn: Conn, report: Report) -> None:
        """The folded counts plus the unfolded deltas equal a count of the rebuilt records."""
        live = {(row["lane"], row["label"]): row["n"] for row in await conn.fetch(_LABEL_COUNTS)}
        expected = self.labels
        for key in sorted(expected.keys() | live.keys()):
            if expected.get(key, 0) != live.get(key, 0):
                lane, label = key
                report.problems.append(
                    f"label '{label}' in lane '{lane}': counted {live.get(key, 0)} records, "
                    f"the ledger has {expected.get(key, 0)}"
                )

    async def _compare_record_counts(self, conn: Conn, report: Report) -> None:
        """The maintained counts of current records equal a count of the rebuilt records."""
        live = {(r["lane"], r["source_type"]): r["n"] for r in await conn.fetch(_RECORD_COUNTS)}
        expected = self.counted
        for key in sorted(expected.keys() | live.keys()):
            if expected.get(key, 0) != live.get(key, 0):
                lane, source_type = key
                report.problems.append(
                    f"records of source type '{source_type}' in lane '{lane}': counted "
                    f"{live.get(key, 0)}, the ledger has {expected.get(key, 0)}"
                )

    async def _compare_member_counts(self, conn: Conn, report: Report) -> None:
        """The maintained counts of each value's current members equal a count of the
        rebuilt memberships."""
        live: dict[tuple[str, str, str], int] = {}
        async for row in conn.cursor(_MEMBER_COUNTS, prefetch=5000):
            live[(row["lane"], row["label"], row["value"])] = row["n"]
        expected = self.members
        differ = [k for k in expected.keys() | live.keys() if expected.get(k, 0) != live.get(k, 0)]
        for key in sorted(differ)[:50]:
            lane, label, value = key
            report.problems.append(
                f"value '{label}:{value}' in lane '{lane}': counted {live.get(key, 0)} "
                f"members, the ledger has {expected.get(key, 0)}"
            )

    async def finish(self, conn: Conn, copy: Copy) -> None:
        await words.insert(conn, self.words)
        await word_counts.recount(conn)
        await vectors.insert(conn, self.vectors)
        for (lane, label), n in self.labels.items():
            if n:
                await copy("label_counts", (lane, label, n))
        for (lane, source_type), n in self.counted.items():
            if n:
                await copy("record_counts", (lane, source_type, n))
        # Inserted rather than copied: each value's key is the database's function of it.
        members = [(key, n) for key, n in self.members.items() if n]
        if members:
            await conn.execute(
                _INSERT_MEMBER_COUNTS,
                *([key[i] for key, _ in members] for i in range(3)),
                [n for _, n in members],
            )


@dataclass(frozen=True)
class RecordKind(KindDefaults):
    name: str = NAME
    prefix: str = "sr_"
    ctes: tuple[Cte, ...] = _CTES
    tables: tuple[Table, ...] = (
        Table("records", RECORD_COLUMNS),
        Table("edge_properties", _MEMBERSHIP_COLUMNS),
        Table("label_counts", ("lane", "label", "records")),
        Table("label_deltas", grant="folded"),
        Table("record_counts", ("lane", "source_type", "records")),
        Table("record_deltas", grant="folded"),
        Table("member_counts", ("label", "value_key", "lane", "value", "records")),
        Table("member_deltas", grant="folded"),
        tags.TABLE,
        words.TABLE,
        words.LANGUAGES,
        *word_counts.TABLES,
        vectors.TABLE,
    )
    event_kinds: tuple[str, ...] = (*RECORD_EVENT_KINDS, *ASSERTED_EVENT_KINDS)
    unique_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def describe(self, object_id: str) -> str:
        return object_id

    def writer(self, before: Mapping[str, Record]) -> _Writer:
        return _Writer(before)

    def replay(self, keep: bool) -> _Replay:
        return _Replay(keep)

    def implied(
        self, before: Mapping[str, Any] | None, entry: Entry, links: Links
    ) -> tuple[Shared, list[Implied]] | str:
        return record_implied(before, entry, links)

    def row_locks(self) -> RecordLocks:
        return _LOCKS

    def fold(self) -> CountsFold:
        return _FOLD

    def links(self) -> RecordLinks:
        return RecordLinks()

    def saw_last(self, state: Mapping[str, Any], object_id: str, links: Links) -> None:
        assert isinstance(links, RecordLinks)
        links.last(state, object_id)


KIND = RecordKind()
