"""A label's values with their readable member counts, and the values near a value.

Read from the counts the write path keeps (`store.kinds.record.counts`): the folded
`member_counts` rows of the caller's lanes plus the deltas not folded yet, summed per
value, so a value only other lanes hold has no count here and is never listed.

Near values (`similarTo`, and the warning a write gets when it introduces a new value
near an existing one) come from two generated columns of `member_counts` (migration
0020): `similar_key`, the value without case, accents, spacing or ASCII punctuation, and
`near_keys`, that key and each key one character shorter (keys of at most 32 characters),
after the label, on a GIN index. Two values share an entry when their keys are equal or
one insertion, deletion, substitution or adjacent swap apart (a deletion-neighbourhood
match, as SymSpell does): a lookup reads the index entries of the n+1 keys of the value
asked about, and each counted value costs its n+1 entries in the index. Nothing here
needs a contrib extension.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.properties import Property
from store.kinds.record.counts import expired_members
from store.kinds.record.queries import member_counts
from store.reads.compiled_sql import Compiler, PageRow, RecordRow, Sel, SiteParams
from store.reads.json_sql import text_cursor
from store.reads.pages import Page, bind_page, encode_cursor, key_cursor, page_size
from store.reads.registry import Before, Ordinary, Values, Wants
from store.reads.snapshot import Reader
from store.reads.statements import PageSql, Params, Statement
from store.reads.visibility import RULE

# Near values a write's warning names, at most, per property.
MAX_NEAR = 3


@dataclass(frozen=True)
class ValueCount:
    label: str
    value: str
    member_count: int

    @property
    def property(self) -> str:
        return f"{self.label}:{self.value}"


@dataclass(frozen=True)
class ValuesArgs:
    label: str
    lane: str | None
    prefix: str | None
    similar_to: str | None
    first: int | None
    after: str | None


@dataclass(frozen=True)
class ValuesShape:
    after: bool = False
    # The optional filters given: `prefix`, `similar` (similarTo).
    filters: tuple[str, ...] = ()


@dataclass(frozen=True)
class ValuesRead:
    field: str = "values"
    before: Before | None = None

    def arguments(self, given: Mapping[str, Any]) -> ValuesArgs:
        return ValuesArgs(
            given["label"],
            given.get("lane"),
            given.get("prefix"),
            given.get("similarTo"),
            given.get("first"),
            given.get("after"),
        )

    def bind(
        self, values: Values, prefix: str, args: ValuesArgs, lanes: Sequence[str]
    ) -> ValuesShape:
        bind_page(values, prefix, args.first)
        chosen = RULE.chosen(lanes, None if args.lane is None else [args.lane])
        shape = bind_values(
            values, prefix, args.label, chosen, args.prefix, args.similar_to, args.after
        )
        if shape is None:
            raise Ordinary("nothing can be listed (the engine's label, or no readable lane)")
        return shape

    def sql(self, compiler: Compiler, sel: Sel, shape: ValuesShape) -> str:
        """SQL: a ValuePage, in value order (the page has no count)."""
        read = PageSql(values_sql(SiteParams(compiler, sel.site), shape), "SELECT NULL::bigint")
        s = compiler.alias("s")
        key = [f"{s}.value_key"]
        # A value may hold any character: its cursor is JSON-escaped as the ordinary path's.
        end = text_cursor(f"{s}.value_key")
        row = PageRow(
            s, s, f"{{size_{s}}}", read.count, "", RecordRow({}, None), key, True, cursor=end
        )
        return compiler.paged(sel, read, "value_key", row)

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> Page[ValueCount]:
        args = self.arguments(given)
        chosen = RULE.chosen(lanes, None if args.lane is None else [args.lane])
        return await values(
            db, args.label, chosen, args.prefix, args.similar_to, args.first, args.after
        )


def listed(label: str) -> bool:
    """Whether `label`'s values may be listed: a caller's label, not the engine's."""
    return not label.startswith(RULE.engine_prefix) and label not in RULE.hidden_labels


def bind_values(
    values: dict[str, Any],
    prefix: str,
    label: str,
    lanes: Sequence[str],
    given: str | None,
    similar_to: str | None,
    after: str | None,
) -> ValuesShape | None:
    """Put the values `values_sql` takes in `values` (each name after `prefix`), refusing
    a cursor this list did not give, and say its shape (`filters`: `prefix` for a
    prefix given, `similar` for similarTo); None when nothing can be listed (the label
    is the engine's, or no lane is readable)."""
    key = key_cursor(after, 1)
    if not listed(label) or not lanes:
        return None
    values.update(
        {
            prefix + "label": label,
            prefix + "lanes": list(lanes),
            prefix + "prefix": given,
            prefix + "similar": similar_to,
            prefix + "after": None if key is None else key[0],
        }
    )
    filters = tuple(
        name for name, v in (("prefix", given), ("similar", similar_to)) if v is not None
    )
    return ValuesShape(key is not None, filters)


def values_sql(p: Params, shape: ValuesShape, by_count: bool = False) -> str:
    """SQL: rows (label, value_key, value, member_count) of the label's values and their readable
    member counts, in value order (`by_count`: most members first), at most `limit`."""
    label, lanes = p("label"), p("lanes", "text[]")
    folded = [f"c.label = {label}", RULE.lane("c", lanes)]
    unfolded = [f"d.label = {label}", RULE.lane("d", lanes)]
    key = "edgeloom_value_key(d.value)"
    if "prefix" in shape.filters:
        start = p("prefix")
        # A range of the primary key (label, value_key, lane): value keys sort bytewise.
        folded.append(f"c.value_key >= {start} AND starts_with(c.value_key, {start})")
        unfolded.append(f"starts_with({key}, {start})")
    if "similar" in shape.filters:
        near = f"edgeloom_near_keys({label}, edgeloom_similar_key({p('similar')}))"
        itself = f"edgeloom_value_key({p('similar')})"
        folded.append(f"c.near_keys && {near} AND c.value_key <> {itself}")
        unfolded.append(
            f"edgeloom_near_keys(d.label, edgeloom_similar_key(d.value)) && {near} "
            f"AND {key} <> {itself}"
        )
    if shape.after:
        folded.append(f"c.value_key > {p('after')}")
        unfolded.append(f"{key} > {p('after')}")
    order = "member_count DESC, u.value_key" if by_count else "u.value_key"
    return f"""SELECT {label}::text AS label, u.value_key, min(u.value) AS value,
          sum(u.n)::bigint AS member_count FROM (
          SELECT c.value_key, c.value, c.records AS n FROM member_counts c
          WHERE {" AND ".join(folded)}
          UNION ALL
          SELECT {key}, d.value, d.delta FROM member_deltas d WHERE {" AND ".join(unfolded)}
          UNION ALL
          SELECT d.value_key, d.value, -1 FROM {expired_members("x_", "d")}
          WHERE {" AND ".join(unfolded)}
        ) u GROUP BY u.value_key HAVING sum(u.n) > 0 ORDER BY {order} LIMIT {p("limit")}"""


@functools.cache
def _statement(shape: ValuesShape, by_count: bool) -> Statement:
    p = Params()
    return p.statement(values_sql(p, shape, by_count))


async def values(
    db: Reader,
    label: str,
    lanes: Sequence[str],
    prefix: str | None,
    similar_to: str | None,
    first: int | None,
    after: str | None,
) -> Page[ValueCount]:
    """The values of `label` that readable current records carry, in value order, each
    with how many such records carry it; with `prefix`, those starting with it; with
    `similar_to`, those near it (see the module), the value itself left out."""
    size = page_size(first)
    names: dict[str, Any] = {"limit": size + 1}
    shape = bind_values(names, "", label, lanes, prefix, similar_to, after)
    if shape is None:
        return Page([], None, False, None)
    statement = _statement(shape, False)
    rows = await db.fetch(statement.text, *statement.args(names))
    items = [ValueCount(label, row["value"], int(row["member_count"])) for row in rows[:size]]
    end = encode_cursor([rows[len(items) - 1]["value_key"]]) if items else None
    return Page(items, None, len(rows) > size, end)


async def near(
    db: Reader, written: Mapping[Property, int], lanes: Sequence[str]
) -> dict[Property, list[ValueCount]]:
    """For each property a write just gave `written[p]` records: when that write
    introduced its value (no other readable record carries it), the readable values of
    its label near it, most members first (at most MAX_NEAR)."""
    found: dict[Property, list[ValueCount]] = {}
    asked = [p for p in written if listed(p.label)]
    if not lanes or not asked:
        return found
    held = await member_counts(db, asked, lanes, None)
    close = _statement(ValuesShape(False, ("similar",)), True)
    for prop in asked:
        if held.get(prop, 0) > written[prop]:
            continue
        names: dict[str, Any] = {
            "label": prop.label,
            "lanes": list(lanes),
            "similar": prop.value,
            "limit": MAX_NEAR,
        }
        rows = await db.fetch(close.text, *close.args(names))
        if rows:
            found[prop] = [ValueCount(prop.label, r["value"], int(r["member_count"])) for r in rows]
    return found


READ = ValuesRead()
