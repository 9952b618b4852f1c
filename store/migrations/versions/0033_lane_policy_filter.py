"""The lanes' policies read a row's lane as a filter, never as an index condition.

Migration 0032 wrote each policy as `lane = ANY(<the read lanes>)`. That comparison is
indexable, so the planner folded it into the index conditions of the gateway's own scans
beside the gateway's `lane = ANY($n)`: two arrays it cannot see, each costed as ten
probes of the index. The plans kept their shape when planned for one call's values, but
a plan kept across calls (the generic plan PostgreSQL's plan cache weighs after five
calls) cost several times more on paper: `gather`'s compiled statement went from 127 to
473 and was planned afresh at every call (PostgreSQL CPU 0.45 -> 1.3 ms a call), and
traverse's walk looked its values' members up by record id instead of by its index of
lane, label and value.

`array_position(<the read lanes>, lane) IS NOT NULL` is true for exactly the same rows
(the setting's array holds no NULL; a NULL lane, or no setting, finds nothing), is no
index condition, and is estimated as true of almost every row: so each statement is
planned as without the policies, and the policy is checked on the rows the gateway's own
conditions found. The comparisons the gateway writes stay leakproof and still run
ahead of it. The writes' checks are unchanged (no plan reads them).

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-07
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

_PREVIOUS = importlib.import_module("store.migrations.versions.0032_lane_policies")
LANE_TABLES: tuple[str, ...] = _PREVIOUS.LANE_TABLES

_READ = "(SELECT string_to_array(current_setting('edgeloom.read_lanes', true), ','))::text[]"


def _readable(column: str) -> str:
    return f"array_position({_READ}, {column}) IS NOT NULL"


# As 0032: an event without a lane (a policy's) concerns every reader; an edge needs both.
_USING = {
    "audit_events": f"lane IS NULL OR {_readable('lane')}",
    "edges": f"{_readable('lane')} AND {_readable('to_lane')}",
}


def upgrade() -> None:
    for table in LANE_TABLES:
        op.execute(f"ALTER POLICY lanes ON {table} USING ({_USING.get(table, _readable('lane'))})")


def downgrade() -> None:
    for table in LANE_TABLES:
        using = _PREVIOUS._USING.get(table, f"lane = ANY({_PREVIOUS._READ})")
        op.execute(f"ALTER POLICY lanes ON {table} USING ({using})")
