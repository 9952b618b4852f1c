"""A ledger kind declared in this module alone is written, verified, exported, imported and
fed like the built-in ones: the registry is the only place that knows the kinds."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gql.server.settings import Settings
from policies.guard import ObjectChange, decide_object
from store.database import create_engine
from store.ledger import registry
from store.ledger.append import append_statement
from store.ledger.command import Applied, Current, Event, Locks, Plan, Txn, Write
from store.ledger.entry import Entry
from store.ledger.implied import Implied, Links, Shared
from store.ledger.registry import Copy, Cte, KindDefaults, Rows, Table
from store.ledger.report import Report
from store.operations.export import export
from store.operations.migrate import migrate
from store.operations.restore import import_
from store.operations.verify import verify
from store.pool import Conn
from tests.gql._feed import feed_client
from tests.store.test_executor import executor_on
from tests.support import Databases, run_gateway, sql

NOTE = "note"
TABLE = """
CREATE TABLE test_notes (
  id text PRIMARY KEY, lane text NOT NULL, title text NOT NULL, body text NOT NULL,
  version int NOT NULL, ledger_hash text NOT NULL
)
"""
_TYPED = (
    ("id", "text"),
    ("lane", "text"),
    ("title", "text"),
    ("body", "text"),
    ("version", "int"),
    ("ledger_hash", "text"),
)
_COLUMNS = tuple(c for c, _ in _TYPED)


def _row(entry: Entry) -> dict[str, Any]:
    s = entry.state
    return {
        "id": entry.object_id,
        "lane": s["lane"],
        "title": s["title"],
        "body": s["body"],
        "version": entry.version,
        "ledger_hash": entry.hash,
    }


class _Writer:
    def add(self, write: Write, entry: Entry, rows: Rows) -> dict[str, Any]:
        row = _row(entry)
        rows.part("moved_notes").append(row)
        return row

    def finish(self, rows: Rows) -> None:
        pass


class _Replay:
    def __init__(self, keep: bool) -> None:
        self.notes: dict[str, dict[str, Any]] = {}

    def object(self, entries: Sequence[Entry]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        row = _row(entries[-1])
        self.notes[row["id"]] = row
        yield "test_notes", tuple(row[c] for c in _COLUMNS)

    async def compare(self, conn: Conn, report: Report) -> None:
        live = {r["id"]: dict(r) for r in await conn.fetch("SELECT * FROM test_notes")}
        if live != self.notes:
            report.problems.append("test_notes differs from the ledger's note entries")

    async def finish(self, conn: Conn, copy: Copy) -> None:
        pass


@dataclass(frozen=True)
class NoteKind(KindDefaults):
    name: str = NOTE
    prefix: str = "nt_"
    ctes: tuple[Cte, ...] = (
        Cte(
            "moved_notes",
            "INSERT INTO test_notes (id, lane, title, body, version, ledger_hash)\n"
            "  SELECT id, lane, title, body, version, ledger_hash FROM {rows}\n"
            "  ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, version = EXCLUDED.version,"
            " ledger_hash = EXCLUDED.ledger_hash",
            _TYPED,
        ),
    )
    tables: tuple[Table, ...] = (Table("test_notes", _COLUMNS),)
    event_kinds: tuple[str, ...] = ("note_written",)
    unique_keys: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {"title": ("lane", "title")}
    )

    def writer(self, before: Mapping[str, Any]) -> _Writer:
        return _Writer()

    def replay(self, keep: bool) -> _Replay:
        return _Replay(keep)

    def implied(
        self, before: Mapping[str, Any] | None, entry: Entry, links: Links
    ) -> tuple[Shared, list[Implied]] | str:
        previous = None if entry.version == 1 else entry.version - 1
        payload = {"title": entry.state["title"]}
        return Shared(None, entry.state["lane"], previous), [Implied("note_written", payload)]


@dataclass(frozen=True)
class WriteNote:
    """Write a note's body, creating the note on its first write."""

    note_id: str
    title: str
    body: str
    lane: str = "default"

    def locks(self) -> Locks:
        return Locks(
            objects=((NOTE, self.note_id),), keys=((NOTE, "title", (self.lane, self.title)),)
        )

    def decide(self, txn: Txn, current: Current[Any]) -> Plan[int]:
        decide_object(txn.rules, txn.agent, ObjectChange(NOTE, self.note_id, self.lane))
        if current.states.get((NOTE, self.note_id), {}).get("body") == self.body:
            return Plan((), lambda _: 0)
        write = Write(
            kind=NOTE,
            object_id=self.note_id,
            event="note_written",
            state={"lane": self.lane, "title": self.title, "body": self.body},
            previous=current.head(NOTE, self.note_id),
            events=(Event("note_written", {"title": self.title}),),
            lane=self.lane,
        )

        def result(applied: Applied) -> int:
            [entry] = applied.entries
            return entry.version

        return Plan((write,), result)


@pytest.fixture
def note_kind() -> Iterator[None]:
    built = append_statement()
    registry.register(NoteKind())
    try:
        yield
    finally:
        registry.unregister(NOTE)
    # What was built from the registry while the kind was in it is built afresh.
    assert append_statement() == built
    assert "note_written" not in registry.event_kinds()


async def notes_database(databases: Databases) -> str:
    """A migrated database with the kind's table, granted as every kind's tables are."""
    url = await databases.create()
    async with sql(url) as conn:
        await conn.execute(TABLE)
    engine = create_engine(url, pool_size=1)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()
    return url


async def notes(url: str) -> list[dict[str, Any]]:
    async with sql(url) as conn:
        return [dict(r) for r in await conn.fetch("SELECT * FROM test_notes ORDER BY id")]


async def test_a_kind_declared_in_a_test_is_written_verified_exported_imported_and_fed(
    note_kind: None, databases: Databases, tmp_path: Path
) -> None:
    assert "moved_notes" in append_statement()[1]
    url = await notes_database(databases)
    first, second = "nt_" + "1" * 32, "nt_" + "2" * 32
    async with (
        run_gateway(Settings(database_url=url, anonymous_agent="dev", pool_size=2)) as gateway,
        feed_client(gateway) as feed,
        executor_on(gateway) as executor,
    ):
        await feed.subscribe("notes", kinds=["note_written"])
        await asyncio.sleep(0.3)
        versions = [
            await executor.execute("dev", WriteNote(first, "plan", "draft")),
            await executor.execute("dev", WriteNote(first, "plan", "final")),
            await executor.execute("dev", WriteNote(first, "plan", "final")),  # no change
            await executor.execute("dev", WriteNote(second, "todo", "milk")),
        ]
        assert versions == [1, 2, 0, 1]
        fed = await feed.events("notes", 3)
        assert [(e["kind"], e["lane"], e["payload"]) for e in fed] == [
            ("note_written", "default", {"title": "plan"}),
            ("note_written", "default", {"title": "plan"}),
            ("note_written", "default", {"title": "todo"}),
        ]
        # Locking takes the kind's own id format and declared keys only.
        with pytest.raises(Exception, match="no note id"):
            await executor.execute("dev", WriteNote("sr_" + "1" * 32, "x", "y"))
    written = await notes(url)
    assert [(n["id"], n["body"], n["version"]) for n in written] == [
        (first, "final", 2),
        (second, "milk", 1),
    ]
    report = await verify(url)
    assert report.ok, report.problems

    dump = tmp_path / "notes.jsonl.gz"
    await export(url, dump)
    target = await databases.create()
    async with sql(target) as conn:
        await conn.execute(TABLE)
    await import_(target, dump, None)
    assert await notes(target) == written
    report = await verify(target)
    assert report.ok, report.problems

    async with sql(url) as conn:
        await conn.execute("ALTER TABLE ledger DISABLE TRIGGER ledger_append_only")
        await conn.execute(
            "UPDATE ledger SET state = jsonb_set(state, '{body}', '\"forged\"') "
            "WHERE kind = 'note' AND object_id = $1 AND version = 2",
            first,
        )
    report = await verify(url)
    assert f"note {first} v2: hash does not match content" in report.problems
    assert "test_notes differs from the ledger's note entries" in report.problems


async def test_an_unregistered_kind_is_refused_by_name(databases: Databases) -> None:
    url = await notes_database(databases)
    async with (
        run_gateway(Settings(database_url=url, anonymous_agent="dev", pool_size=2)) as gateway,
        executor_on(gateway) as executor,
    ):
        with pytest.raises(Exception, match="no ledger kind 'note' is registered"):
            await executor.execute("dev", WriteNote("nt_" + "3" * 32, "x", "y"))
    assert await notes(url) == []


@pytest.mark.parametrize(
    "held",
    [
        "note\x1fnt_" + "4" * 32,  # the object, by (kind, id)
        "note\x1ftitle\x1fdefault\x1fshared",  # its declared unique key (lane, title)
    ],
)
async def test_a_command_waits_for_its_object_and_its_unique_key(
    note_kind: None, databases: Databases, held: str
) -> None:
    url = await notes_database(databases)
    async with (
        run_gateway(Settings(database_url=url, anonymous_agent="dev", pool_size=2)) as gateway,
        executor_on(gateway) as executor,
        sql(url) as other,
    ):
        transaction = other.transaction()
        await transaction.start()
        await other.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 7113007))", held)
        write = asyncio.create_task(
            executor.execute("dev", WriteNote("nt_" + "4" * 32, "shared", "body"))
        )
        await asyncio.sleep(0.5)
        assert not write.done()
        await transaction.rollback()
        assert await asyncio.wait_for(write, 10) == 1


async def test_a_command_takes_its_keys_before_its_objects(
    note_kind: None, databases: Databases
) -> None:
    """Keys first, then objects, each in sorted order: a command that finds an object
    holding a key it locked takes that object after the key, so a command naming both
    must take them in the same order, whatever their locks' hashes say."""
    url = await notes_database(databases)
    key = "note\x1ftitle\x1fdefault\x1fordered"
    lock = "SELECT hashtextextended($1, 7113007)"
    async with (
        run_gateway(Settings(database_url=url, anonymous_agent="dev", pool_size=2)) as gateway,
        executor_on(gateway) as executor,
        sql(url) as other,
        sql(url) as probe,
    ):
        key_hash = await probe.fetchval(lock, key)
        for n in range(200):
            note_id = f"nt_{n:032d}"
            if await probe.fetchval(lock, f"note\x1f{note_id}") < key_hash:
                break
        transaction = other.transaction()
        await transaction.start()
        await other.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 7113007))", f"note\x1f{note_id}"
        )
        write = asyncio.create_task(executor.execute("dev", WriteNote(note_id, "ordered", "body")))
        await asyncio.sleep(0.5)
        assert not write.done()  # waiting for the note, with its key already taken
        taken = "SELECT pg_try_advisory_lock(hashtextextended($1, 7113007))"
        assert await probe.fetchval(taken, key) is False
        await transaction.rollback()
        assert await asyncio.wait_for(write, 10) == 1
