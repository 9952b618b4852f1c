"""The `gather` read: records by set operations over edge properties (INTERSECT, UNION,
TIMELINE), and a hyperedge's members, a gather of one value."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from policies.properties import Property
from store.kinds.record import counts
from store.kinds.record.compiled import page
from store.kinds.record.queries import (
    bind_properties,
    gather_properties,
    keyed_page,
    members_sql,
    one_value_page,
)
from store.reads.compiled_sql import AssertedRow, Compiler, EdgePropertyRow, Sel, SiteParams
from store.reads.gather_mode import GatherMode
from store.reads.pages import Page, bind_page, id_cursor, page_size, time_cursor
from store.reads.registry import Before, Values, Wants
from store.reads.snapshot import Reader
from store.reads.statements import PageSql, Params, Statement, page_rows
from store.reads.visibility import RULE


@dataclass(frozen=True)
class GatherArgs:
    match: Sequence[str]
    mode: GatherMode
    lanes: Sequence[str] | None
    as_of: datetime | None
    first: int | None
    after: str | None


@dataclass(frozen=True)
class GatherShape:
    """What of a gather's arguments changes its statement."""

    as_of: bool = False
    after: bool = False
    mode: GatherMode = GatherMode.INTERSECT
    # How many distinct properties it combines (0: nothing to gather).
    properties: int = 0


@dataclass(frozen=True)
class GatherRead:
    field: str = "gather"
    before: Before | None = None

    def arguments(self, given: Mapping[str, Any]) -> GatherArgs:
        mode = GatherMode((given.get("mode") or GatherMode.INTERSECT).value)
        return GatherArgs(
            tuple(given["match"]),
            mode,
            given.get("lanes"),
            given.get("asOf"),
            given.get("first"),
            given.get("after"),
        )

    def bind(
        self, values: Values, prefix: str, args: GatherArgs, lanes: Sequence[str]
    ) -> GatherShape:
        bind_page(values, prefix, args.first)
        chosen = RULE.chosen(lanes, args.lanes)
        return bind_gather(values, prefix, args.match, args.mode, chosen, args.as_of, args.after)

    def sql(self, compiler: Compiler, sel: Sel, shape: GatherShape) -> str:
        p = SiteParams(compiler, sel.site)
        read = gather_sql(p, shape, compiler.alias("members"))
        as_of = p("as_of", "timestamptz") if shape.as_of else None
        return page(compiler, sel, read, as_of, by_time=shape.mode is GatherMode.TIMELINE)

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> Page[str]:
        args = self.arguments(given)
        chosen = RULE.chosen(lanes, args.lanes)
        count = wants("totalCount")
        return await gather(
            db, args.match, args.mode, chosen, args.as_of, args.first, args.after, count
        )


def bind_gather(
    values: dict[str, Any],
    prefix: str,
    match: Sequence[str],
    mode: GatherMode,
    lanes: Sequence[str],
    as_of: datetime | None,
    after: str | None,
) -> GatherShape:
    """Check a gather's arguments (refusing what is wrong, naming it), put the values
    `gather_sql` takes in `values` (each name after `prefix`), and say its shape; no
    properties when `match` leaves none to combine (only the engine's labels)."""
    props = gather_properties(match)
    values[prefix + "lanes"] = list(lanes)
    values[prefix + "as_of"] = as_of
    if not props:
        return GatherShape(properties=0)
    bind_properties(values, prefix, props)
    if mode is GatherMode.TIMELINE:
        keyed = time_cursor(after)
        paged = keyed is not None
        if keyed is not None:
            values[prefix + "after_at"], values[prefix + "after_id"] = keyed
    else:
        after_id = id_cursor(after)
        paged = after_id is not None
        if after_id is not None:
            values[prefix + "after_id"] = after_id
    return GatherShape(as_of=as_of is not None, after=paged, mode=mode, properties=len(props))


def gather_sql(p: Params, shape: GatherShape, members: str = "members") -> PageSql:
    """SQL: a gather's page (rows id, and for TIMELINE created_at: when the record joined)
    in its order, and its count, over the CTE `members` (`members_sql`)."""
    if shape.properties == 0:
        return PageSql("SELECT NULL::text AS id WHERE false", "SELECT 0")
    limit = p("limit")
    if shape.mode is GatherMode.TIMELINE:
        keyed = ""
        if shape.after:
            keyed = (
                f"AND (m.joined, m.record_id) > ({p('after_at', 'timestamptz')}, {p('after_id')})"
            )
        # Keyed by joining time, under the column name the page reader takes times from.
        page = f"""SELECT m.record_id AS id, m.joined AS created_at FROM {members} m
            WHERE true {keyed} ORDER BY m.joined, m.record_id LIMIT {limit}"""
    elif shape.properties == 1:
        page = one_value_page(p, shape.as_of, shape.after)
    else:
        keyed = f"WHERE m.record_id > {p('after_id')}" if shape.after else ""
        page = f"SELECT m.record_id AS id FROM {members} m {keyed} ORDER BY 1 LIMIT {limit}"
    if shape.properties == 1 and not shape.as_of:
        # One value's current members: the count the write path keeps.
        count = counts.member_count(p("label_0"), p("value_0"), p("lanes", "text[]"))
    else:
        count = f"SELECT count(*) FROM {members}"
    found = members_sql(p, shape.properties, shape.mode, shape.as_of)
    return PageSql(page, count, f"{members} AS ({found})")


@functools.cache
def _gather_statement(shape: GatherShape, with_total: bool) -> Statement:
    p = Params()
    return page_rows(p, gather_sql(p, shape), with_total)


async def gather(
    db: Reader,
    match: Sequence[str],
    mode: GatherMode,
    lanes: Sequence[str],
    as_of: datetime | None,
    first: int | None,
    after: str | None,
    count: bool = True,
) -> Page[str]:
    """Record ids on every (INTERSECT) or any (UNION, TIMELINE) of the edge properties.

    INTERSECT and UNION list records by id; TIMELINE lists them by when each joined
    one of the edges. The adjustment label stays out of set operations.
    """
    size = page_size(first)
    values: dict[str, Any] = {"limit": size + 1}
    shape = bind_gather(values, "", match, mode, lanes, as_of, after)
    if not shape.properties:
        return Page([], 0 if count else None, False, None)
    statement = _gather_statement(shape, count)
    rows = await db.fetch(statement.text, *statement.args(values))
    return keyed_page(rows, size, count, by_time=mode is GatherMode.TIMELINE)


@dataclass(frozen=True)
class MembersShape:
    """What changes the statement of a page of members nested in an answer (a hyperedge's,
    an asserted edge's): whether it goes on after a cursor."""

    after: bool


def bind_members(
    prefix: str, args: Mapping[str, Any], lanes: Sequence[str], values: Values
) -> MembersShape:
    """A page of members: its size, and its cursor when it has one (the property and the
    instant are the row's it is nested in, `member_page`)."""
    bind_page(values, prefix, args.get("first"))
    key = id_cursor(args.get("after"))
    if key is not None:
        values[prefix + "after_id"] = key
    return MembersShape(after=key is not None)


def members_shape(as_of: bool, after: bool) -> GatherShape:
    """The shape of one property's members (label_0, value_0), by id: a one-value gather."""
    return GatherShape(as_of=as_of, after=after, mode=GatherMode.UNION, properties=1)


async def members(
    db: Reader,
    prop: Property,
    lanes: Sequence[str],
    as_of: datetime | None,
    first: int | None,
    after: str | None,
    count: bool = True,
) -> Page[str]:
    """The readable records carrying `prop` now (or at `as_of`), by id, a page at a time:
    the members of a hyperedge or of an asserted edge (a group)."""
    size = page_size(first)
    key = id_cursor(after)
    values: dict[str, Any] = {"lanes": list(lanes), "as_of": as_of, "after_id": key}
    values["limit"] = size + 1
    bind_properties(values, "", [prop])
    statement = _gather_statement(members_shape(as_of is not None, key is not None), count)
    rows = await db.fetch(statement.text, *statement.args(values))
    return keyed_page(rows, size, count, by_time=False)


def member_page(compiler: Compiler, sel: Sel, row: EdgePropertyRow | AssertedRow) -> str:
    """SQL: a RecordPage of the readable records carrying the value now (or at as_of):
    a gather of that one value, its label and value the row's (its page bound by the
    members field's own binder, `bind_members`)."""
    shape = compiler.shapes[sel.site or 0]
    assert isinstance(shape, MembersShape)
    given = {"label_0": row.label, "value_0": row.value, "lanes": compiler.lanes()}
    if row.as_of is not None:
        given["as_of"] = row.as_of
    p = SiteParams(compiler, sel.site, given)
    read = gather_sql(p, members_shape(row.as_of is not None, shape.after), compiler.alias("mb"))
    return page(compiler, sel, read, row.as_of, by_time=False)


READ = GatherRead()
