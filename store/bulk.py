"""Set-based inserts: a batch travels as one JSON parameter that PostgreSQL expands.

One statement with one parameter per table, instead of one parameter set per row,
keeps a 500-record ingest from binding tens of thousands of values one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, Table, bindparam, column, func, insert, select
from sqlalchemy.dialects.postgresql import JSONB


def rows_insert(table: Table, columns: Sequence[str], param: str) -> Insert:
    """INSERT INTO table (columns) SELECT columns FROM jsonb_to_recordset(:param)."""
    rows = (
        func.jsonb_to_recordset(bindparam(param, type_=JSONB))
        .table_valued(*[column(name, table.c[name].type) for name in columns])
        .render_derived(name=f"{param}_rows", with_types=True)
    )
    return insert(table).from_select(list(columns), select(*[rows.c[name] for name in columns]))


def json_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows as JSON values; times keep their microseconds and offset exactly."""
    return [
        {
            key: value.isoformat() if isinstance(value, datetime) else value
            for key, value in row.items()
        }
        for row in rows
    ]
