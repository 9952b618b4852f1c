"""The search statistics of each lane: how many current records hold each lexeme, and
how many current records the lane's words hold with how many lexemes together (under
the lexeme '', which no text yields).

They are what a search scores by (inverse document frequency over the caller's lanes,
each record's length against their average) and plans by, and they are kept per lane so
that a caller's scores and plan are sums over the lanes it reads, never touched by a lane
it cannot. They are kept as the member counts are (`counts`): the append statement
derives signed deltas from the words rows it closes and opens (`DELTAS`), in the
write's own transaction, and the fold adds them into `word_counts` after commit. A read
sums the folded counts and the unfolded deltas: exact for its snapshot.

They are a projection of the words rows (themselves a projection of the ledger):
`verify` compares them with a count of the current words rows, import and a lane's new
language count them again (`recount`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.ledger.registry import Cte, Table
from store.ledger.report import Report
from store.pool import Conn
from store.reads.visibility import RULE

TABLES = (
    Table("word_counts", ("lane", "lexeme", "records", "lexemes")),
    Table("word_deltas", grant="folded"),
)
# The lexeme under which a lane's totals are kept: no text-search parser yields it.
TOTAL = ""

_OPEN = RULE.held("o", None)
_LIVE = RULE.held("w", None)
_READABLE = RULE.lane("", "$1::text[]")

DELTAS = Cte(
    "new_word_deltas",
    f"""INSERT INTO word_deltas (lane, lexeme, records, lexemes)
  SELECT lane, lexeme, sum(d), sum(n) FROM (
    SELECT o.lane, u.lexeme, 1 AS d, 0 AS n
      FROM opened_words o, unnest(tsvector_to_array(o.words)) AS u(lexeme)
      WHERE {_OPEN}
    UNION ALL SELECT o.lane, '', 1, length(o.words) FROM opened_words o
      WHERE {_OPEN}
    UNION ALL SELECT c.lane, u.lexeme, -1, 0
      FROM closed_words c, unnest(tsvector_to_array(c.words)) AS u(lexeme)
    UNION ALL SELECT c.lane, '', -1, -length(c.words) FROM closed_words c
  ) m
  GROUP BY lane, lexeme HAVING sum(d) <> 0 OR sum(n) <> 0""",
)

FOLD = """
WITH folded AS (DELETE FROM word_deltas RETURNING lane, lexeme, records, lexemes),
summed AS (
  SELECT lane, lexeme, sum(records) AS records, sum(lexemes) AS lexemes FROM folded
  GROUP BY lane, lexeme
)
INSERT INTO word_counts AS c (lane, lexeme, records, lexemes)
SELECT lane, lexeme, records, lexemes FROM summed
ON CONFLICT (lane, lexeme) DO UPDATE
  SET records = c.records + EXCLUDED.records, lexemes = c.lexemes + EXCLUDED.lexemes
"""


def read_sql(lexemes: str) -> str:
    """SQL: the counts of the lexemes `lexemes` (a text[] expression; TOTAL among them for
    the totals) in the lanes `$1` (text[]), as the snapshot has them: rows of lane, lexeme,
    records and lexemes."""
    return f"""
SELECT lane, lexeme, sum(records)::bigint AS records, sum(lexemes)::bigint AS lexemes FROM (
  SELECT lane, lexeme, records, lexemes FROM word_counts
  WHERE {_READABLE} AND lexeme = ANY({lexemes})
  UNION ALL SELECT lane, lexeme, records, lexemes FROM word_deltas
  WHERE {_READABLE} AND lexeme = ANY({lexemes})
) c GROUP BY lane, lexeme"""


@dataclass
class LaneCounts:
    """One lane's statistics for the lexemes asked: records holding each, and the lane's
    current records and lexemes."""

    records: int = 0
    lexemes: int = 0
    holding: dict[str, int] = field(default_factory=dict)


def collect(lanes: Sequence[str], rows: Iterable[Sequence[Any]]) -> dict[str, LaneCounts]:
    """Each lane's statistics from `read_sql`'s rows (lane, lexeme, records, lexemes); a
    lane with no words has empty counts."""
    found = {lane: LaneCounts() for lane in lanes}
    for lane, lexeme, records, lexemes in rows:
        counts = found[lane]
        if lexeme == TOTAL:
            counts.records, counts.lexemes = records, lexemes
        elif records:
            counts.holding[lexeme] = records
    return found


# What a count of the current words rows gives, lane by lane.
_COUNTED = f"""
SELECT w.lane, u.lexeme, count(*)::bigint AS records, 0::bigint AS lexemes
FROM record_words w, unnest(tsvector_to_array(w.words)) AS u(lexeme)
WHERE {_LIVE} AND ($1::text IS NULL OR w.lane = $1)
GROUP BY w.lane, u.lexeme
UNION ALL
SELECT w.lane, '', count(*)::bigint, sum(length(w.words))::bigint
FROM record_words w WHERE {_LIVE} AND ($1::text IS NULL OR w.lane = $1)
GROUP BY w.lane
"""
_KEPT = """
SELECT lane, lexeme, sum(records)::bigint AS records, sum(lexemes)::bigint AS lexemes FROM (
  SELECT lane, lexeme, records, lexemes FROM word_counts
  UNION ALL SELECT lane, lexeme, records, lexemes FROM word_deltas
) c GROUP BY lane, lexeme HAVING sum(records) <> 0 OR sum(lexemes) <> 0
"""


def _key(row: Any) -> tuple[str, str]:
    return row["lane"], row["lexeme"]


async def compare(conn: Conn, report: Report) -> None:
    """verify: the kept statistics against a count of the current words rows (which
    verify checks against the ledger)."""
    counted = {_key(r): (r["records"], r["lexemes"]) for r in await conn.fetch(_COUNTED, None)}
    kept = {_key(r): (r["records"], r["lexemes"]) for r in await conn.fetch(_KEPT)}
    differ = [k for k in counted.keys() | kept.keys() if counted.get(k) != kept.get(k)]
    for lane, lexeme in sorted(differ)[:50]:
        what = "its records and lexemes" if lexeme == TOTAL else f"the records holding '{lexeme}'"
        report.problems.append(
            f"search statistics of lane '{lane}': {what} counted {kept.get((lane, lexeme))}, "
            f"its words rows give {counted.get((lane, lexeme))}"
        )


async def recount(conn: Conn, lane: str | None = None) -> None:
    """Count the statistics of `lane` (None: every lane) again from its current words
    rows, in one transaction (import; a lane moved to another language)."""
    where = "" if lane is None else " WHERE lane = $1"
    args = () if lane is None else (lane,)
    async with conn.transaction():
        await conn.execute(f"DELETE FROM word_deltas{where}", *args)
        await conn.execute(f"DELETE FROM word_counts{where}", *args)
        await conn.execute(
            "INSERT INTO word_counts (lane, lexeme, records, lexemes) " + _COUNTED, lane
        )
