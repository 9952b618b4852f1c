"""Running a SQLAlchemy Core statement on a read snapshot (an asyncpg `Reader`).

Most reads are fixed-text statements; the few built with SQLAlchemy Core (asserted
edges, traverse, corrections) compile here to asyncpg's `$n` form,
with expanding IN lists rendered, and run on the same snapshot as the rest of
the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import asyncpg
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from store.reads.snapshot import Reader

_DIALECT = PGDialect_asyncpg(paramstyle="numeric_dollar")  # type: ignore[no-untyped-call]


def compiled(
    statement: ClauseElement, params: Mapping[str, Any] | None = None
) -> tuple[str, list[Any]]:
    """The SQL text and positional arguments of `statement` with `params` bound."""
    done = cast(SQLCompiler, statement.compile(dialect=_DIALECT))
    state = done.construct_expanded_state(dict(params or {}))
    order = state.positiontup or []
    return state.statement, [state.parameters[name] for name in order]


async def fetch(
    db: Reader, statement: ClauseElement, params: Mapping[str, Any] | None = None
) -> list[asyncpg.Record]:
    text, args = compiled(statement, params)
    return await db.fetch(text, *args)
