"""The `record` read: one record by id or unique prefix, as it is or as it was at asOf."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from store.errors import NotFoundError, RetiredRecordError
from store.ids import RECORD_ID
from store.kinds.record.compiled import record_source
from store.kinds.record.resolve import (
    candidates_sql,
    check_record_ident,
    named_sql,
    readable_sql,
    resolve_id,
    retired_sql,
)
from store.reads.compiled_sql import Compiler, RecordRow, Sel
from store.reads.registry import Before, Values, Wants
from store.reads.snapshot import Reader


@dataclass(frozen=True)
class RecordArgs:
    ident: str
    as_of: datetime | None


@dataclass(frozen=True)
class RecordShape:
    as_of: bool
    # The id given as a prefix rather than whole.
    prefix: bool


@dataclass(frozen=True)
class RecordRead:
    field: str = "record"
    before: Before | None = None

    def arguments(self, given: Mapping[str, Any]) -> RecordArgs:
        return RecordArgs(given["id"], given.get("asOf"))

    def bind(
        self, values: Values, prefix: str, args: RecordArgs, lanes: Sequence[str]
    ) -> RecordShape:
        ident = values[prefix + "id"] = check_record_ident(args.ident)
        values[prefix + "as_of"] = args.as_of
        return RecordShape(args.as_of is not None, RECORD_ID.fullmatch(ident) is None)

    def sql(self, compiler: Compiler, sel: Sel, shape: RecordShape) -> str:
        ident = compiler.arg(sel.site, "id")
        lanes = compiler.lanes()
        r = compiler.alias("r")
        as_of = compiler.arg(sel.site, "as_of", "timestamptz") if shape.as_of else None
        if shape.prefix:
            # A prefix must name at most one readable record; more is a refusal
            # (AMBIGUOUS_ID) that the ordinary path words.
            compiler.checks.append(
                f"(SELECT count(*) FROM ({candidates_sql(ident, lanes, as_of, 2)}) c) < 2"
            )
        # A record retired then is a refusal saying so, which the ordinary path words.
        q = compiler.alias("q")
        q_lateral = record_source(compiler, q, as_of)[0]
        compiler.checks.append(
            f"NOT EXISTS (SELECT 1 FROM records {q} {q_lateral} "
            f"WHERE {named_sql(q, ident, shape.prefix)} AND {retired_sql(q, lanes, as_of)})"
        )
        lateral, cols = record_source(compiler, r, as_of)
        return (
            f"(SELECT {compiler.fields(sel.children, RecordRow(cols, as_of))} FROM records {r} "
            f"{lateral} WHERE {named_sql(r, ident, shape.prefix)} "
            f"AND {readable_sql(r, lanes, as_of)} ORDER BY {r}.id LIMIT 1)"
        )

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> str | None:
        """The full id of the record, or None when no readable record has it; a record
        retired then is refused (RetiredRecordError)."""
        args = self.arguments(given)
        try:
            return await resolve_id(db, args.ident, lanes, args.as_of)
        except RetiredRecordError:
            raise  # a NotFoundError that says when, by whom and why
        except NotFoundError:
            return None


READ = RecordRead()
