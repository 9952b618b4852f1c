"""The statements the live feed reads by: the snapshot a read runs under, and the events
a previous snapshot could not see (docs/feed.md)."""

from __future__ import annotations

_EVENT_COLUMNS = (
    "seq, id, kind, record_id, lane, actor, at, payload, version_before, version_after, "
    "object_kind, txid::text::bigint AS txid"
)
# The snapshot of the current transaction; in REPEATABLE READ every later statement
# of the transaction sees exactly what it describes.
#
# A snapshot lists the running transactions below its xmax only; one that took its
# transaction id after the newest commit is running too, and can hold a seq below an
# event the snapshot sees. `xids` names those (every transaction id held in this
# database, read just after the snapshot; 32-bit, widened against xmax in Python).
_SNAPSHOT_COLUMNS = """
pg_snapshot_xmin(s)::text::bigint AS xmin,
pg_snapshot_xmax(s)::text::bigint AS xmax,
ARRAY(SELECT pg_snapshot_xip(s)::text::bigint) AS xip,
ARRAY(SELECT backend_xid::text::bigint FROM pg_stat_activity
      WHERE backend_xid IS NOT NULL AND datname = current_database()) AS xids
"""
SNAPSHOT = f"""
SELECT {_SNAPSHOT_COLUMNS},
       (SELECT coalesce(max(seq), 0) FROM audit_events) AS newest
FROM pg_current_snapshot() AS s
"""
# Every event the previous snapshot could not see: its transaction had not yet
# started ($1: at or above its xmax) or was running ($2: its xip, all below xmax, so
# the branches never overlap). Each branch walks ix_audit_events_txid in txid order,
# so a read costs what it returns, however long the table: ordered by seq over the
# whole condition, the planner may walk the seq index and filter every event ever
# written. {limit} caps each branch; the caller orders by seq.
# (`audit_events.txid`, the column: the output column of that name is its text.)
_UNSEEN_BRANCHES = """
(SELECT {columns} FROM audit_events
 WHERE txid >= $1::text::xid8 ORDER BY audit_events.txid {limit})
UNION ALL
(SELECT {columns} FROM audit_events
 WHERE txid = ANY($2::text[]::xid8[]) ORDER BY audit_events.txid {limit})
"""


def poll_statement(limit: int) -> str:
    """One statement, one round trip: the statement's snapshot (pg_current_snapshot()
    is the snapshot the statement runs under) beside the first `limit` unseen events.
    A read that fills the limit (either branch may have stopped short) is repeated in
    the transaction below, which streams any number of rows under one snapshot.

    The limit is written into the text, so that the generic plan, made once for the
    reader's connection, walks the index in txid order and stops at the limit (a
    custom plan, made for each poll, spent longer planning than the poll ran, and more
    as the table grows).
    """
    unseen = _UNSEEN_BRANCHES.format(columns=_EVENT_COLUMNS, limit=f"LIMIT {int(limit)}")
    return f"""
SELECT snap.xmin, snap.xmax, snap.xip, snap.xids, e.*
FROM (SELECT {_SNAPSHOT_COLUMNS} FROM pg_current_snapshot() AS s) AS snap
LEFT JOIN LATERAL (
  SELECT * FROM ({unseen}) AS u ORDER BY seq LIMIT {int(limit)}
) AS e ON true
"""


UNSEEN = f"""
SELECT * FROM ({_UNSEEN_BRANCHES.format(columns=_EVENT_COLUMNS, limit="")}) AS u ORDER BY seq
"""
