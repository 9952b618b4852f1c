"""The words of each record version: the text index search reads
(`store.kinds.record.search`).

A row holds one interval in which a live record's content, lane and source type stayed
the same, with that content's `tsvector` in its lane's text-search language and the
interval's transaction time (recorded_from, recorded_to): the current rows have
recorded_to NULL, and a search as of T reads the rows held at T from the same GIN index.
A change of properties alone keeps the row; a retirement closes it and a restoring opens
another, so a retired record is found by no current search and by every earlier one.

Like the tags, the words are not in the ledger: the rule that cuts a record's history
into intervals (`opens`) is pure, run by the write path on each new version and by
`verify` and import over the replayed ledger; the `tsvector` is PostgreSQL's function of
the version's content, which verify recomputes from the ledger. Each lane's language is
kept in `search_languages` (no row: `stemmed_english`, migration 0027); `relanguage`
moves a lane to another one and rebuilds its rows in batches, off the request path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from store.kinds.record import intervals as _intervals
from store.kinds.record import word_counts
from store.kinds.record.intervals import Interval as Interval
from store.kinds.record.model import Record
from store.kinds.record.tags import FORMAT
from store.ledger.registry import Cte, Table
from store.ledger.report import Report
from store.pool import Conn

TABLE = Table(
    "record_words",
    ("record_id", "from_version", "lane", "source_type", "recorded_from", "recorded_to"),
)
LANGUAGES = Table("search_languages", ("lane", "config"))

# The language a lane's words are indexed in, as a function the reads share (migration
# 0019); the write path joins its table by the same rule.
CONFIG = "edgeloom_search_config"

CLOSED_WORDS = "closed_words"
OPENED_WORDS = "opened_words"
CTES = (
    Cte(
        CLOSED_WORDS,
        """UPDATE record_words w SET recorded_to = x.at
  FROM {rows} WHERE w.record_id = x.record_id AND w.recorded_to IS NULL
  RETURNING w.lane, w.words""",
        (("record_id", "text"), ("at", "timestamptz")),
    ),
    # The lane's language by CONFIG's own rule (its row in search_languages, else
    # `stemmed_english`), joined once for the statement: asked of CONFIG, each row paid a lookup
    # of its own, about a tenth of what keeping its words costs (bench/README.md).
    Cte(
        OPENED_WORDS,
        """INSERT INTO record_words (record_id, from_version, lane, source_type,
                          recorded_from, recorded_to, words)
  SELECT x.record_id, x.from_version, x.lane, x.source_type, x.recorded_from,
         x.recorded_to, to_tsvector(coalesce(s.config, 'stemmed_english')::regconfig, x.content)
  FROM {rows} LEFT JOIN search_languages s USING (lane)
  RETURNING lane, words, recorded_to""",
        (
            ("record_id", "text"),
            ("from_version", "int"),
            ("lane", "text"),
            ("source_type", "text"),
            ("recorded_from", "timestamptz"),
            ("recorded_to", "timestamptz"),
            ("content", "text"),
        ),
    ),
)


def searchable(record: Record) -> str:
    """The text a record is searched by: its content, but none for a record whose
    metadata names the format of content the engine wrote (intake's JSON of a file or a
    folder, which copies its parts' headings and links' lines): a note is found once, by
    its parts, which hold its text (as `TEXT`, in SQL)."""
    return "" if FORMAT in record.state.metadata else record.state.content


# `searchable` of a ledger entry's state, as SQL (migration 0027).
TEXT = "edgeloom_search_text"


def _held(record: Record) -> object | None:
    """What a words row keeps: a live record's searchable text, lane and source type."""
    s = record.state
    return None if s.retired is not None else (searchable(record), s.lane, s.source_type)


def opens(before: Record | None, after: Record) -> tuple[bool, bool]:
    """Whether the version `after` closes the interval `before` held, and opens one."""
    return _intervals.opens(_held, before, after)


def intervals(versions: Iterable[Record]) -> list[Interval]:
    """A record's intervals over its versions, oldest first (verify, import, migration)."""
    return _intervals.intervals(_held, versions)


def writer() -> _intervals.Writer:
    """The write path's words rows for one command."""
    return _intervals.Writer(
        _held, CLOSED_WORDS, OPENED_WORDS, lambda r: {"content": searchable(r)}
    )


# The words of given intervals from their versions' content in the ledger, in the lane's
# language (import, the migration, verify's rebuild).
_INSERT = f"""
INSERT INTO record_words (record_id, from_version, lane, source_type, recorded_from,
                          recorded_to, words)
SELECT u.record_id, u.from_version, u.lane, u.source_type, u.recorded_from, u.recorded_to,
       to_tsvector({CONFIG}(u.lane), {TEXT}(l.state))
FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::timestamptz[],
            $6::timestamptz[])
  AS u(record_id, from_version, lane, source_type, recorded_from, recorded_to)
JOIN ledger l ON l.kind = 'record' AND l.object_id = u.record_id AND l.version = u.from_version
"""

# Rows a rebuild of a lane's words takes a statement at a time.
_BATCH = 2000


async def insert(conn: Conn, rows: Sequence[Interval]) -> None:
    """Write the rows of `rows`, their words computed from the ledger, in batches."""
    await _intervals.insert(conn, _INSERT, rows)


_LIVE = "SELECT " + ", ".join(TABLE.columns) + " FROM record_words"
# The rows whose words are not their version's content in their lane's language.
_STALE = f"""
SELECT w.record_id, w.from_version FROM record_words w
LEFT JOIN ledger l ON l.kind = 'record' AND l.object_id = w.record_id
  AND l.version = w.from_version
WHERE w.words IS DISTINCT FROM to_tsvector({CONFIG}(w.lane), {TEXT}(l.state))
ORDER BY 1, 2 LIMIT 50
"""


async def compare(conn: Conn, expected: Iterable[Interval], report: Report) -> None:
    """verify: the live intervals against the replayed ones, and each row's words against
    its version's content."""
    await _intervals.compare(
        conn, expected, report, (_LIVE, _STALE), "words", "differ from its content"
    )


# -- the language of a lane --------------------------------------------------------

_LANGUAGE = f"SELECT {CONFIG}($1)::text"
_SET_LANGUAGE = """
INSERT INTO search_languages (lane, config) VALUES ($1, $2)
ON CONFLICT (lane) DO UPDATE SET config = EXCLUDED.config
"""
_REWORD = f"""
WITH batch AS (
  SELECT record_id, from_version FROM record_words
  WHERE lane = $1 AND (record_id, from_version) > ($2, $3)
  ORDER BY record_id, from_version LIMIT $4
),
moved AS (
  UPDATE record_words w SET words = to_tsvector({CONFIG}(w.lane), {TEXT}(l.state))
  FROM batch b, ledger l
  WHERE w.record_id = b.record_id AND w.from_version = b.from_version
    AND l.kind = 'record' AND l.object_id = b.record_id AND l.version = b.from_version
)
SELECT b.record_id, b.from_version, (SELECT count(*) FROM batch) AS n
FROM batch b ORDER BY 1 DESC, 2 DESC LIMIT 1
"""
_LANE_ROWS = "SELECT count(*) FROM record_words WHERE lane = $1"


async def language(conn: Conn, lane: str) -> str:
    """The language `lane`'s words are indexed in."""
    found: str = await conn.fetchval(_LANGUAGE, lane)
    return found


async def relanguage(
    conn: Conn, lane: str, config: str, progress: Callable[[int, int], None] | None = None
) -> int:
    """Index `lane`'s words in `config` from now on and rebuild the rows it holds, each
    batch its own transaction (writers wait for none of it); `progress(done, total)`
    after each batch. Returns how many rows were rebuilt. Searches of the lane use the
    new language at once: rows not rebuilt yet match only on words both agree on."""
    await conn.execute(_SET_LANGUAGE, lane, config)
    total: int = await conn.fetchval(_LANE_ROWS, lane)
    done, after = 0, ("", 0)
    while True:
        last = await conn.fetchrow(_REWORD, lane, after[0], after[1], _BATCH)
        if last is None:
            break
        after = (last["record_id"], last["from_version"])
        done += last["n"]
        if progress is not None:
            progress(done, total)
    # The lane's search statistics count its words in the new language.
    await word_counts.recount(conn, lane)
    return done


async def follow_policy(
    conn: Conn,
    wanted: Mapping[str, str],
    progress: Callable[[str], Callable[[int, int], None]] | None = None,
) -> list[tuple[str, str, str, int]]:
    """Move every lane whose words are in another language than `wanted` (lane ->
    language, as the policy declares) to it: (lane, was, now, rows rebuilt) of each."""
    moved = []
    for lane, config in sorted(wanted.items()):
        was = await language(conn, lane)
        if was != config:
            rows = await relanguage(
                conn, lane, config, None if progress is None else progress(lane)
            )
            moved.append((lane, was, config, rows))
    return moved


_SET_IF_EMPTY = """
INSERT INTO search_languages (lane, config)
SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM record_words WHERE lane = $1)
ON CONFLICT (lane) DO UPDATE SET config = EXCLUDED.config
RETURNING lane
"""


async def adopt_if_empty(conn: Conn, lane: str, config: str) -> bool:
    """Index `lane`'s words in `config` from now on when it has none to rebuild; whether
    it did."""
    return await conn.fetchval(_SET_IF_EMPTY, lane, config) is not None
