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
    """A connection, group or adjustment chain: its value and its readable history."""

    prop: Property
    memberships: tuple[Membership, ...]  # in the order records joined it
    as_of: datetime | None = None

    @property
    def hint(self) -> str:
        return hint_of(self.prop)

    @property
    def created_at(self) -> datetime:
        return self.memberships[0].joined_at

    @property
    def created_by(self) -> str:
        return self.memberships[0].joined_by

    def _live(self, m: Membership) -> bool:
        return m.left_at is None or (self.as_of is not None and m.left_at > self.as_of)

    @property
    def active(self) -> bool:
        return any(self._live(m) for m in self.memberships)

    @property
    def record_ids(self) -> list[str]:
        """Its members now (or at as_of); once it has ended, those it had when it ended."""
        live = [m.record_id for m in self.memberships if self._live(m)]
        if live or not self.memberships:
            return _unique(live)
        end = self.ended_at
        return _unique([m.record_id for m in self.memberships if m.left_at == end])

    @property
    def ended_at(self) -> datetime | None:
        if self.active:
            return None
        return max(m.left_at for m in self.memberships if m.left_at is not None)

    @property
    def ended_by(self) -> str | None:
        end = self.ended_at
        return next((m.left_by for m in self.memberships if m.left_at == end), None)


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))


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


def _asserted_statement(at: bool) -> str:
    """Each asked value ($1 labels, $2 values) with its memberships in the lanes $3, at $4."""
    found = memberships_sql("u.l", "u.v", "$3::text[]", "$4::timestamptz" if at else None)
    return f"""SELECT u.l AS label, u.v AS value, ms.record_id, ms.joined_at, ms.joined_by,
          ms.left_at, ms.left_by
        FROM unnest($1::text[], $2::text[]) AS u(l, v) CROSS JOIN LATERAL ({found}) ms
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
    for row in rows:
        found.setdefault(Property(row["label"], row["value"]), []).append(
            Membership(
                record_id=row["record_id"],
                joined_at=row["joined_at"],
                joined_by=row["joined_by"],
                left_at=row["left_at"],
                left_by=row["left_by"],
            )
        )
    return {prop: Asserted(prop, tuple(ms), as_of) for prop, ms in found.items()}


async def ended_already(
    db: Reader, prop: Property, lanes: Sequence[str], ident: str
) -> EndedAlreadyError | None:
    """Why ending `prop` found no members, when it had some the reader may read: it has
    ended already (None: the reader never could read one, as if it never existed)."""
    found = (await asserted(db, [prop], lanes)).get(prop)
    if found is None or found.ended_at is None:
        return None
    return EndedAlreadyError(kind_name(prop.label), ident, found.ended_at, found.ended_by or "")
