"""The vectors of each record version: the index a search by vector reads.

A row holds one interval in which a live record's vector, lane and source type stayed the
same (`store.kinds.record.intervals`), with that vector and its size, and the interval's
transaction time: the current rows have recorded_to NULL, a search as of T reads the rows
held at T. A retirement closes the row and a restoring opens another, as for the words.

The vector is in the ledger (the entry's state), so verify and import rebuild these rows
from it. Where the server has pgvector the column is a `vector`, and each lane whose
embedding a policy declares gets its own HNSW index (cosine) over `embedding::vector(n)`
for the lane's rows of that size (`edgeloom_vector_index(lane, n)`, migration 0028):
pgvector indexes only a column of fixed size, and lanes declare different ones, so one
untyped column with a partial expression index per lane and size keeps one table (one
write path, one verify) while each search walks only graphs of its own lanes' vectors,
which no other lane's can capture. Where it has none the column is `real[]`: the rows
are kept alike, and vector search is off (`availability`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from store.kinds.record import embedding
from store.kinds.record import intervals as _intervals
from store.kinds.record.intervals import Interval
from store.kinds.record.model import Record
from store.ledger.registry import Cte, Table
from store.ledger.report import Report
from store.pool import Conn

TABLE = Table(
    "record_vectors",
    ("record_id", "from_version", "lane", "source_type", "recorded_from", "recorded_to"),
)

CLOSED_VECTORS = "closed_vectors"
OPENED_VECTORS = "opened_vectors"
CTES = (
    Cte(
        CLOSED_VECTORS,
        """UPDATE record_vectors v SET recorded_to = x.at
  FROM {rows} WHERE v.record_id = x.record_id AND v.recorded_to IS NULL""",
        (("record_id", "text"), ("at", "timestamptz")),
    ),
    # real[] on the way in: pgvector casts it to its `vector` on assignment.
    Cte(
        OPENED_VECTORS,
        """INSERT INTO record_vectors (record_id, from_version, lane, source_type,
                            recorded_from, recorded_to, dims, embedding)
  SELECT record_id, from_version, lane, source_type, recorded_from, recorded_to,
         cardinality(embedding), embedding
  FROM {rows}""",
        (
            ("record_id", "text"),
            ("from_version", "int"),
            ("lane", "text"),
            ("source_type", "text"),
            ("recorded_from", "timestamptz"),
            ("recorded_to", "timestamptz"),
            ("embedding", "real[]"),
        ),
    ),
)


def _held(record: Record) -> object | None:
    """What a vectors row keeps: a live record's vector, lane and source type."""
    s = record.state
    if s.retired is not None or s.embedding is None:
        return None
    return (s.embedding, s.lane, s.source_type)


def intervals(versions: Iterable[Record]) -> list[Interval]:
    """A record's vector intervals over its versions, oldest first (verify, import)."""
    return _intervals.intervals(_held, versions)


def writer() -> _intervals.Writer:
    """The write path's vectors rows for one command."""
    return _intervals.Writer(
        _held,
        CLOSED_VECTORS,
        OPENED_VECTORS,
        lambda r: {"embedding": list(embedding.unpack(r.state.embedding or b""))},
    )


# The vector of an entry's state, as the real[] the index holds.
_LEDGER_VECTOR = (
    "ARRAY(SELECT x::real FROM jsonb_array_elements_text(l.state->'embedding') "
    "WITH ORDINALITY AS e(x, n) ORDER BY n)"
)
_INSERT = f"""
INSERT INTO record_vectors (record_id, from_version, lane, source_type, recorded_from,
                            recorded_to, dims, embedding)
SELECT u.record_id, u.from_version, u.lane, u.source_type, u.recorded_from, u.recorded_to,
       jsonb_array_length(l.state->'embedding'), {_LEDGER_VECTOR}
FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::timestamptz[],
            $6::timestamptz[])
  AS u(record_id, from_version, lane, source_type, recorded_from, recorded_to)
JOIN ledger l ON l.kind = 'record' AND l.object_id = u.record_id AND l.version = u.from_version
"""


async def insert(conn: Conn, rows: Sequence[Interval]) -> None:
    """Write the rows of `rows`, their vectors read from the ledger, in batches."""
    await _intervals.insert(conn, _INSERT, rows)


_LIVE = "SELECT " + ", ".join(TABLE.columns) + " FROM record_vectors"
# The rows whose vector is not their version's.
_STALE = f"""
SELECT v.record_id, v.from_version FROM record_vectors v
LEFT JOIN ledger l ON l.kind = 'record' AND l.object_id = v.record_id
  AND l.version = v.from_version
WHERE v.embedding::real[] IS DISTINCT FROM {_LEDGER_VECTOR}
   OR v.dims IS DISTINCT FROM jsonb_array_length(l.state->'embedding')
ORDER BY 1, 2 LIMIT 50
"""


async def compare(conn: Conn, expected: Iterable[Interval], report: Report) -> None:
    """verify: the live intervals against the replayed ones, and each row's vector
    against its version's."""
    await _intervals.compare(
        conn, expected, report, (_LIVE, _STALE), "vector", "differs from its entry"
    )


# -- whether the server can search by vector ---------------------------------------

# What a gateway that did not look (a process without the start's check) says.
UNCHECKED = "vector search is off: this process did not look for pgvector at its start"

_COLUMN_TYPE = """
SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
WHERE a.attrelid = 'record_vectors'::regclass AND a.attname = 'embedding'
"""
_AVAILABLE = "SELECT count(*) > 0 FROM pg_available_extensions WHERE name = 'vector'"
_INDEX = "SELECT edgeloom_vector_index($1, $2)"


async def availability(conn: Conn) -> str | None:
    """Why this memory cannot search by vector (None: it can)."""
    if await conn.fetchval(_COLUMN_TYPE) == "vector":
        return None
    if await conn.fetchval(_AVAILABLE):
        return (
            "vector search is off: the server offers pgvector, but this memory was made "
            "before it was installed (or by a role that may not create it); its vectors "
            "are in the ledger: `edgeloom export`, then `edgeloom import` into a new "
            "database, indexes them"
        )
    return (
        "vector search is off: the PostgreSQL server has no pgvector extension (`vector`), "
        "so vectors are kept with their records but not indexed; serve from a server with "
        "pgvector (the embedded one has it) to search by vector"
    )


async def index_lane(conn: Conn, lane: str, dimensions: int) -> None:
    """Make sure the vectors of `lane` of `dimensions` numbers have their HNSW index (built
    once, at the first start under a policy declaring that lane's embedding)."""
    await conn.execute(_INDEX, lane, dimensions)
