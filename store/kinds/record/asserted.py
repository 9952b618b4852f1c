"""Reading asserted edges: connections, groups and adjustment chains.

They are derived at read time, not kept in a table of their own: a value's
membership intervals (`edge_properties`, a projection `verify` already rebuilds)
say who carried it from when to when, and the record entries that opened and closed
each interval say who made the change. Every read is filtered to readable lanes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, literal, select, tuple_

from policies.properties import Property
from store import tables as t
from store.errors import EndedAlreadyError
from store.ids import RECORD_KIND
from store.kinds.record.asserted_commands import hint_of, kind_name
from store.reads.core_sql import fetch
from store.reads.snapshot import Reader
from store.reads.visibility import CORE_AT, CORE_LANES, RULE, core

ep = t.edge_properties


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
    joined_entry = t.ledger.alias("joined_entry")
    left_entry = t.ledger.alias("left_entry")
    where: list[Any] = [
        # The indexes hold each value's key (store.tables), so the lookup is by key.
        tuple_(ep.c.label, ep.c.value_key).in_(
            [tuple_(literal(p.label), func.edgeloom_value_key(p.value)) for p in props]
        ),
        core(RULE.lane(ep.name, CORE_LANES), lanes=list(lanes)),
    ]
    # A record retired now (or by as_of) is on no asserted edge, history included: as if
    # it had never been written.
    retired = RULE.not_retired(t.records.name, None if as_of is None else CORE_AT)
    if as_of is not None:
        where.append(core(RULE.recorded_by(ep.name, CORE_AT) + retired, as_of=as_of))
    elif retired:
        where.append(core("true" + retired))
    query = (
        select(
            ep.c.label,
            ep.c.value,
            ep.c.record_id,
            ep.c.recorded_from,
            ep.c.recorded_to,
            joined_entry.c.actor.label("joined_by"),
            left_entry.c.actor.label("left_by"),
        )
        .join(t.records, t.records.c.id == ep.c.record_id)
        .join(joined_entry, _entry_of(joined_entry, ep.c.from_version))
        .outerjoin(left_entry, _entry_of(left_entry, ep.c.to_version))
        .where(*where)
        # A chain lists its records in time order: when each joined it, and among
        # records that joined at once (a record and the one it adjusts), the older first.
        .order_by(ep.c.recorded_from, t.records.c.created_at, ep.c.record_id)
    )
    found: dict[Property, list[Membership]] = {}
    for row in await fetch(db, query):
        left_at = RULE.seen_left_at(row["recorded_to"], as_of)
        found.setdefault(Property(row["label"], row["value"]), []).append(
            Membership(
                record_id=row["record_id"],
                joined_at=row["recorded_from"],
                joined_by=row["joined_by"],
                left_at=left_at,
                left_by=row["left_by"] if left_at is not None else None,
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


def _entry_of(entry: Any, version: Any) -> Any:
    return and_(
        entry.c.kind == RECORD_KIND,
        entry.c.object_id == ep.c.record_id,
        entry.c.version == version,
    )
