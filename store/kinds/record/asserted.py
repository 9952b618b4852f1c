"""Reading asserted edges: connections, groups and adjustment chains.

They are derived at read time, not kept in a table of their own: a value's
membership intervals (`edge_properties`, a projection `verify` already rebuilds)
say who carried it from when to when, and the record entries that opened and closed
each interval say who made the change. Every read is filtered to readable lanes, and
the resolvers and the compiled path read the intervals from one builder
(`memberships_sql`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from policies.properties import Property
from store.errors import EndedAlreadyError
from store.kinds.record.asserted_commands import hint_of, kind_name
from store.kinds.record.queries import carries
from store.reads.snapshot import Reader
from store.reads.visibility import RULE


@dataclass(frozen=True)
class Membership:
    """One interval in which one readable record carried the value."""

    record_id: str
    joined_at: datetime
    joined_by: str
    left_at: datetime | None
    left_by: str | None


@dataclass(frozen=True)
class Asserted:
    """A connection, group or adjustment chain: its value, its readable history, and the
    summary `summary_sql` gives of it (the one rule both read paths follow)."""

    prop: Property
    memberships: tuple[Membership, ...]  # in the order records joined it
    created_at: datetime
    created_by: str
    active: bool
    ended_at: datetime | None
    ended_by: str | None
    # Its members now (or at as_of); once it has ended, those it had when it ended.
    record_ids: tuple[str, ...]
    as_of: datetime | None = None

    @property
    def hint(self) -> str:
        return hint_of(self.prop)


def memberships_sql(label: str, value: str, lanes: str, as_of: str | None, a: str = "") -> str:
    """SQL: each interval in which a readable record carried `label`:`value` (SQL
    expressions), by `as_of` with what happened after it unseen: its record_id, joined_at,
    joined_by, left_at, left_by, and `n`, its place in the order the records joined (when
    each joined, and among records that joined at once, such as a record and the one it
    adjusts, the older first). `a` starts its aliases, to keep them apart from those of a
    statement around it.

    A record retired now (or by as_of) is on no asserted edge, history included: as if it
    had never been written. The record entries that opened and closed each interval say
    who made the change."""
    e, r, j, k = f"{a}e", f"{a}r", f"{a}j", f"{a}k"
    left = RULE.left_at(e, as_of)
    at = "" if as_of is None else f"AND {RULE.recorded_by(e, as_of)}"
    return f"""SELECT {e}.record_id, {e}.recorded_from AS joined_at, {j}.actor AS joined_by,
          {left} AS left_at, CASE WHEN {left} IS NULL THEN NULL ELSE {k}.actor END AS left_by,
          row_number() OVER (ORDER BY {e}.recorded_from, {r}.created_at, {e}.record_id) AS n
        FROM edge_properties {e} JOIN records {r} ON {r}.id = {e}.record_id
          {RULE.not_retired(r, as_of)}
        JOIN ledger {j} ON {j}.kind = 'record' AND {j}.object_id = {e}.record_id
          AND {j}.version = {e}.from_version
        LEFT JOIN ledger {k} ON {k}.kind = 'record' AND {k}.object_id = {e}.record_id
          AND {k}.version = {e}.to_version
        WHERE {carries(e, label, value)} AND {RULE.lane(e, lanes)} {at}"""


def summary_sql(label: str, value: str, lanes: str, as_of: str | None, a: str = "") -> str:
    """SQL: the one row summing up the asserted edge `label`:`value` (SQL expressions) as
    a reader of `lanes` sees it at `as_of`, from its `memberships_sql`: `n`, how many
    readable memberships it has (0: none, as if it did not exist); `created_at` and
    `actor`, its first joining's; `active`, whether a readable record is on it; and once
    it is not, `ended_at`, when its last member left, and `ended_by`, who made that change
    (the first in joining order among those who left then)."""
    m = f"{a}m"
    live = f"bool_or({m}.left_at IS NULL)"
    return f"""SELECT count(*) AS n, min({m}.joined_at) AS created_at,
          (array_agg({m}.joined_by ORDER BY {m}.n))[1] AS actor, {live} AS active,
          CASE WHEN {live} THEN NULL ELSE max({m}.left_at) END AS ended_at,
          CASE WHEN {live} THEN NULL
            ELSE (array_agg({m}.left_by ORDER BY {m}.left_at DESC, {m}.n))[1] END AS ended_by
        FROM ({memberships_sql(label, value, lanes, as_of, a)}) {m}"""


def members_sql(
    label: str, value: str, lanes: str, as_of: str | None, summary: str, a: str = ""
) -> str:
    """SQL: the records the asserted edge joins, each once, with `n`, the place of its first
    joining: those on it now (or at as_of), or once it has ended, those that left when it
    ended. `summary` is the alias of the edge's `summary_sql` row."""
    m = f"{a}m"
    return f"""SELECT {m}.record_id, min({m}.n) AS n
        FROM ({memberships_sql(label, value, lanes, as_of, a)}) {m}
        WHERE CASE WHEN {summary}.active THEN {m}.left_at IS NULL
          ELSE {m}.left_at = {summary}.ended_at END
        GROUP BY {m}.record_id"""


def _asserted_statement(at: bool) -> str:
    """Each asked value ($1 labels, $2 values) with its summary, its members and its
    memberships (one row each) in the lanes $3, at $4."""
    args = ("u.l", "u.v", "$3::text[]", "$4::timestamptz" if at else None)
    return f"""SELECT u.l AS label, u.v AS value, s.created_at, s.actor, s.active, s.ended_at,
          s.ended_by, k.record_ids, ms.record_id, ms.joined_at, ms.joined_by, ms.left_at,
          ms.left_by
        FROM unnest($1::text[], $2::text[]) AS u(l, v)
        CROSS JOIN LATERAL ({summary_sql(*args, "s")}) s
        CROSS JOIN LATERAL (SELECT array_agg(k.record_id ORDER BY k.n) AS record_ids
          FROM ({members_sql(*args, "s", "k")}) k) k
        CROSS JOIN LATERAL ({memberships_sql(*args)}) ms
        ORDER BY u.l, u.v, ms.n"""


_ASSERTED_NOW = _asserted_statement(at=False)
_ASSERTED_AT = _asserted_statement(at=True)


async def asserted(
    db: Reader,
    props: Sequence[Property],
    lanes: Sequence[str],
    as_of: datetime | None = None,
) -> dict[Property, Asserted]:
    """The readable history of each value, in one statement (values nobody readable
    carried are left out)."""
    if not props:
        return {}
    asked = list(dict.fromkeys(props))
    args: list[Any] = [[p.label for p in asked], [p.value for p in asked], list(lanes)]
    if as_of is None:
        rows = await db.fetch(_ASSERTED_NOW, *args)
    else:
        rows = await db.fetch(_ASSERTED_AT, *args, as_of)
    found: dict[Property, list[Membership]] = {}
    summary: dict[Property, Any] = {}
    for row in rows:
        prop = Property(row["label"], row["value"])
        summary.setdefault(prop, row)
        found.setdefault(prop, []).append(
            Membership(
                record_id=row["record_id"],
                joined_at=row["joined_at"],
                joined_by=row["joined_by"],
                left_at=row["left_at"],
                left_by=row["left_by"],
            )
        )
    return {
        prop: Asserted(
            prop,
            tuple(ms),
            created_at=summary[prop]["created_at"],
            created_by=summary[prop]["actor"],
            active=summary[prop]["active"],
            ended_at=summary[prop]["ended_at"],
            ended_by=summary[prop]["ended_by"],
            record_ids=tuple(summary[prop]["record_ids"] or ()),
            as_of=as_of,
        )
        for prop, ms in found.items()
    }


async def ended_already(
    db: Reader, prop: Property, lanes: Sequence[str], ident: str
) -> EndedAlreadyError | None:
    """Why ending `prop` found no members, when it had some the reader may read: it has
    ended already (None: the reader never could read one, as if it never existed)."""
    found = (await asserted(db, [prop], lanes)).get(prop)
    if found is None or found.ended_at is None:
        return None
    return EndedAlreadyError(kind_name(prop.label), ident, found.ended_at, found.ended_by or "")
