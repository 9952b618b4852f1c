"""The `records` read: the records you can read, in the order they were written,
optionally of one source type, holding a tag or having a name (a title or an alias)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from store.kinds.record import counts
from store.kinds.record.compiled import page
from store.kinds.record.names import named, named_count, normal_name
from store.kinds.record.queries import keyed_page
from store.kinds.record.tags import normal_tag, tagged, tagged_count
from store.reads.compiled_sql import Compiler, Sel, SiteParams
from store.reads.pages import Page, bind_page, page_size, time_cursor
from store.reads.registry import Before, Values, Wants
from store.reads.snapshot import Reader
from store.reads.statements import PageSql, Params, Statement, page_rows
from store.reads.visibility import RULE


@dataclass(frozen=True)
class RecordsArgs:
    lane: str | None
    source_type: str | None
    first: int | None
    after: str | None
    tag: str | None
    named: str | None


@dataclass(frozen=True)
class RecordsShape:
    """Which of its optional arguments a `records` statement filters by."""

    after: bool = False
    source_type: bool = False
    tag: bool = False
    named: bool = False


@dataclass(frozen=True)
class RecordsRead:
    field: str = "records"
    before: Before | None = None

    def arguments(self, given: Mapping[str, Any]) -> RecordsArgs:
        return RecordsArgs(
            given.get("lane"),
            given.get("sourceType"),
            given.get("first"),
            given.get("after"),
            given.get("tag"),
            given.get("named"),
        )

    def bind(
        self, values: Values, prefix: str, args: RecordsArgs, lanes: Sequence[str]
    ) -> RecordsShape:
        bind_page(values, prefix, args.first)
        chosen = RULE.chosen(lanes, None if args.lane is None else [args.lane])
        return bind_records(
            values, prefix, chosen, args.source_type, args.after, args.tag, args.named
        )

    def sql(self, compiler: Compiler, sel: Sel, shape: RecordsShape) -> str:
        # Whole rows: the page's items need no second read of `records`.
        read = records_sql(SiteParams(compiler, sel.site), shape, whole_rows=True)
        return page(compiler, sel, read, None, by_time=True, whole_rows=True)

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> Page[str]:
        args = self.arguments(given)
        chosen = RULE.chosen(lanes, None if args.lane is None else [args.lane])
        count = wants("totalCount")
        return await browse(
            db, chosen, args.source_type, args.first, args.after, count, args.tag, args.named
        )


def bind_records(
    values: dict[str, Any],
    prefix: str,
    lanes: Sequence[str],
    source_type: str | None,
    after: str | None,
    tag: str | None,
    name: str | None = None,
) -> RecordsShape:
    """Put the values `records_sql` takes in `values` (each name after `prefix`), refusing
    a cursor this list did not give, and say its shape."""
    key = time_cursor(after)
    # Each lane is read on its own (unnest): once each.
    values[prefix + "lanes"] = list(dict.fromkeys(lanes))
    values[prefix + "source_type"] = source_type
    values[prefix + "tag"] = None if tag is None else normal_tag(tag)
    values[prefix + "named"] = None if name is None else normal_name(name)
    if key is not None:
        values[prefix + "after_at"], values[prefix + "after_id"] = key
    return RecordsShape(
        after=key is not None,
        source_type=source_type is not None,
        tag=tag is not None,
        named=name is not None,
    )


def records_sql(p: Params, shape: RecordsShape, whole_rows: bool = False) -> PageSql:
    """SQL: the records of `lanes` in order of writing (created_at, id), optionally of one
    source type, holding a tag or having a name (a title or an alias); each row its id and
    created_at, or with `whole_rows` the whole `records` row."""
    lanes = p("lanes", "text[]")
    where = f"AND q.source_type = {p('source_type')}" if shape.source_type else ""
    if shape.tag:
        where += f" AND {tagged('q', p('tag'))}"
    if shape.named:
        where += f" AND {named('q', p('named'))}"
    keyed = ""
    if shape.after:
        keyed = f"AND (q.created_at, q.id) > ({p('after_at', 'timestamptz')}, {p('after_id')})"
    limit = p("limit")
    columns = "q.*" if whole_rows else "q.id, q.created_at"
    # Each lane's first rows come from the (lane, created_at, id) index in order;
    # the merged top rows of all lanes are the page, without sorting whole lanes.
    page = f"""SELECT pg.* FROM unnest({lanes}) AS l(lane)
        CROSS JOIN LATERAL (SELECT {columns} FROM records q
          WHERE {RULE.record_in_lane("q", "l.lane")} {where} {keyed}
          ORDER BY q.created_at, q.id LIMIT {limit}) pg
        ORDER BY pg.created_at, pg.id LIMIT {limit}"""
    # The count the write path keeps for the lanes (and source type): a few rows; a
    # tag's (or a name's) records are counted from its index (no count is kept of them).
    kind = p("source_type") if shape.source_type else None
    tag = p("tag") if shape.tag else None
    if shape.named:
        count = named_count(lanes, p("named"), kind, tag)
    elif tag is not None:
        count = tagged_count(lanes, tag, kind)
    else:
        count = counts.records_count(lanes, kind)
    return PageSql(page, count)


@functools.cache
def _browse_statement(shape: RecordsShape, count: bool) -> Statement:
    p = Params()
    return page_rows(p, records_sql(p, shape), count)


async def browse(
    db: Reader,
    lanes: Sequence[str],
    source_type: str | None,
    first: int | None,
    after: str | None,
    count: bool = True,
    tag: str | None = None,
    name: str | None = None,
) -> Page[str]:
    """Record ids in order of writing, optionally of one source type, holding a tag, or
    having a name (a title or an alias)."""
    size = page_size(first)
    values: dict[str, Any] = {"limit": size + 1}
    shape = bind_records(values, "", lanes, source_type, after, tag, name)
    statement = _browse_statement(shape, count)
    rows = await db.fetch(statement.text, *statement.args(values))
    return keyed_page(rows, size, count, by_time=True)


READ = RecordsRead()
