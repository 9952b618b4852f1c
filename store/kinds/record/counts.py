"""Counts the write path maintains: current records per (lane, source type), current
members per (label, value, lane), and records per label (`labels`).

Each is kept as `label_counts` is (see `labels`): every write appends signed deltas in
its own transaction, derived from what the projection rule moved (`projection.
record_changes`; the member deltas from the memberships the append statement closes
and opens, in that statement), and never updates a shared counter row. After commit a
process whose writes have come to a fold (`fold_share`) folds every committed delta
into the counts, all three in one short transaction, so a snapshot sees each delta
either unfolded or folded, never both. A read sums the folded counts and the unfolded
deltas of the caller's lanes: exact for the snapshot it reads, in a few rows however
many records there are. Counts as of an earlier instant come from the membership
intervals.

A record that expired is counted out at its instant, before its tombstone (the write
that moves the counts) is written: every read of a count now also subtracts what the
pending expiries due now hold (`RULE.expired_now`, `expired_members`), read from the
index of those records alone (`ix_records_expiring`: they are few, since the gateway
writes their tombstones within seconds) and their current memberships.
"""

from __future__ import annotations

from store.kinds.record import word_counts
from store.kinds.record.words import OPENED_WORDS
from store.ledger.registry import Rows
from store.pool import Conn
from store.reads import lane_floor
from store.reads.visibility import RULE

# The append parts that move the counts (see store.kinds.record.kind): the label and
# record deltas a command sends, and the memberships it closes and opens, from which
# the statement derives its member deltas (at most one delta row each).
LABEL_DELTAS = "new_label_deltas"
RECORD_DELTAS = "new_record_deltas"
MEMBER_DELTAS = "new_member_deltas"
OPENED = "opened_memberships"
CLOSED = "closed_memberships"
# A fold is due after this many appends (a read of a value's or a lane's count sums the
# unfolded deltas, at most one row per append), or sooner after this many memberships
# moved: the longer deltas wait, the more of a hot value's deltas one fold sums into one
# update, and a value's deltas are found by its hash however many others wait.
FOLD_AFTER_APPENDS = 100
FOLD_AFTER_MEMBERSHIPS = 50_000
# ... or after this many records' words opened: each adds a delta row per lexeme, which
# a search's plan reads by (lane, lexeme) until they are folded.
FOLD_AFTER_WORDS = 2_000
# Any fixed number: one fold at a time; the others skip rather than wait.
_FOLD_LOCK = 7_113_005

_FOLDS = (
    """
WITH folded AS (DELETE FROM label_deltas RETURNING lane, label, delta),
summed AS (SELECT lane, label, sum(delta) AS n FROM folded GROUP BY lane, label)
INSERT INTO label_counts AS c (lane, label, records)
SELECT lane, label, n FROM summed
ON CONFLICT (lane, label) DO UPDATE SET records = c.records + EXCLUDED.records
""",
    """
WITH folded AS (DELETE FROM record_deltas RETURNING lane, source_type, delta),
summed AS (SELECT lane, source_type, sum(delta) AS n FROM folded GROUP BY lane, source_type)
INSERT INTO record_counts AS c (lane, source_type, records)
SELECT lane, source_type, n FROM summed
ON CONFLICT (lane, source_type) DO UPDATE SET records = c.records + EXCLUDED.records
""",
    """
WITH folded AS (
  DELETE FROM member_deltas
  RETURNING label, edgeloom_value_key(value) AS value_key, lane, value, delta
),
summed AS (
  SELECT label, value_key, lane, min(value) AS value, sum(delta) AS n FROM folded
  GROUP BY label, value_key, lane
)
INSERT INTO member_counts AS c (label, value_key, lane, value, records)
SELECT label, value_key, lane, value, n FROM summed
ON CONFLICT (label, value_key, lane) DO UPDATE SET records = c.records + EXCLUDED.records
""",
    word_counts.FOLD,
)


class CountsFold:
    """The fold, as the record kind declares it (`Kind.fold`): the executor runs it after
    the commits that bring its process to one."""

    def share(self, rows: Rows) -> float:
        return fold_share(rows)

    async def fold(self, conn: Conn) -> bool:
        return await fold(conn)


def fold_share(rows: Rows) -> float:
    """How far a write's rows bring its process towards a fold, due at 1."""
    moved = len(rows.parts.get(OPENED, ())) + len(rows.parts.get(CLOSED, ()))
    worded = len(rows.parts.get(OPENED_WORDS, ()))
    return 1 / FOLD_AFTER_APPENDS + moved / FOLD_AFTER_MEMBERSHIPS + worded / FOLD_AFTER_WORDS


async def fold(conn: Conn) -> bool:
    """Fold the committed deltas into the counts; False when another fold is running."""
    # Every lane's deltas: the gateway's own work, as the crossing role.
    async with lane_floor.crossing(conn):
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _FOLD_LOCK):
            return False
        # A fold lost in a crash is no loss: its deltas are still there, unfolded, and
        # its commit is atomic all the same. So it does not wait for the disk.
        await conn.execute("SET LOCAL synchronous_commit = off")
        for statement in _FOLDS:
            await conn.execute(statement)
    return True


def expired_members(x: str, m: str) -> str:
    """SQL: `records {x} JOIN edge_properties {m}`, the current memberships of the records
    expired now whose tombstone is not written yet (`RULE.expired_now`): the maintained
    counts still count them."""
    return (
        f"records {x} JOIN edge_properties {m} ON {m}.record_id = {x}.id "
        f"AND {RULE.held(m, None)} AND {RULE.expired_now(x)}"
    )


def records_count(lanes: str, source_type: str | None = None) -> str:
    """SQL: how many current records the lanes `lanes` hold (of `source_type` if given)."""
    of_type = "" if source_type is None else f" AND source_type = {source_type}"
    where = f"{RULE.lane('', lanes)}{of_type}"
    return (
        "SELECT coalesce(sum(c.n), 0)::bigint FROM ("
        f"SELECT records AS n FROM record_counts WHERE {where} "
        f"UNION ALL SELECT delta FROM record_deltas WHERE {where} "
        f"UNION ALL SELECT -count(*) FROM records x_ WHERE {RULE.expired_now('x_')} "
        f"AND {RULE.lane('x_', lanes)}{of_type.replace('source_type', 'x_.source_type')}) c"
    )


def member_count(
    label: str,
    value: str,
    lanes: str,
    *,
    key: str | None = None,
    value_hash: str | None = None,
    shown: bool = True,
) -> str:
    """SQL: how many records in the lanes `lanes` carry `label`:`value` now (SQL
    expressions; `key`, the value's key, and `value_hash`, its member hash, if the caller
    has them). With `shown`, a label never shown as a hyperedge has none.

    A caller counting for many rows passes the hash as a column of its own: the lanes'
    row-level security lets only leakproof comparisons reach an index before its policy
    (migration 0032), and `edgeloom_member_hash` of a row's columns is not one, so the
    deltas would be scanned whole for each row."""
    key = key or f"edgeloom_value_key({value})"
    value_hash = value_hash or f"edgeloom_member_hash({label}, {key})"
    where = f"label = {label} AND {RULE.lane('', lanes)}"
    expired = f"m_.label = {label} AND m_.value_key = {key} AND {RULE.lane('m_', lanes)}"
    if shown:
        where += f" AND {RULE.shown_label('label')}"
        expired += f" AND {RULE.shown_label('m_.label')}"
    return (
        "SELECT coalesce(sum(c.n), 0)::bigint FROM ("
        f"SELECT records AS n FROM member_counts WHERE value_key = {key} AND {where} "
        "UNION ALL SELECT delta FROM member_deltas "
        f"WHERE value_hash = {value_hash} "
        f"AND edgeloom_value_key(value) = {key} AND {where} "
        f"UNION ALL SELECT -count(*) FROM {expired_members('x_', 'm_')} WHERE {expired}) c"
    )


async def fold_in_transaction(conn: Conn) -> None:
    """Fold every committed delta and the transaction's own now, inside the caller's
    transaction, waiting for a fold that is running (an erasure: its tombstone's deltas
    are folded before it drops the counts left at zero)."""
    await conn.execute("SELECT pg_advisory_xact_lock($1)", _FOLD_LOCK)
    for statement in _FOLDS:
        await conn.execute(statement)
