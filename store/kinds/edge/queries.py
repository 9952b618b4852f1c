"""Reads of typed edges: listed by filters, around one record, the review queue, and the
neighbourhood of some records (`ego`), each now or as of an instant.

Every statement takes its predicate from the visibility rule (`RULE.edge`). Now, the
edges are the projection's rows; as of T they are each edge's newest ledger entry
written by T (`edge_source`), so a read of the past sees the state recorded then.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from store.errors import InvalidInputError
from store.kinds.edge.kind import NAME
from store.kinds.edge.model import COLUMNS, CONTRADICTS, RESOLVED, UNRESOLVED, Edge
from store.kinds.record.names import note_of
from store.reads.pages import Page, encode_cursor, key_cursor, page_size, time_cursor
from store.reads.snapshot import Reader
from store.reads.statements import PageSql, Params, Statement, page_rows
from store.reads.visibility import RULE

# The state an entry holds beyond the edge's key, which never changes: an upsert of a
# live key updates the edge holding it, and one after its retirement makes a new edge.
_STATE_COLUMNS = (
    "lane text, to_lane text, "
    "weight float8, confidence float8, provenance_actor text, provenance_type text, "
    "evidence jsonb, detector text, conflict_state text, resolution text, resolver text, "
    "winner_id text, valid_at timestamptz, invalid_at timestamptz, expired_at timestamptz, "
    "created_at timestamptz"
)


def edge_source(p: Params, as_of: bool) -> str:
    """The edges as a FROM item aliased `g`: the projection now; as of T each edge's
    newest ledger entry written by T. The projection keeps every edge ever made, and its
    key columns hold for all its versions, so a filter on them is an index condition on
    `edges` (the subquery is pulled up) and each edge then costs one backward step on
    the ledger's `(kind, object_id, version)` index: nothing grows with the ledger."""
    if not as_of:
        return "edges g"
    return f"""(SELECT e.id, e.from_id, e.to_id, e.type, e.namespace, s.*,
          l.at AS updated_at, l.version, l.hash AS ledger_hash
        FROM edges e CROSS JOIN LATERAL (SELECT v.state, v.at, v.version, v.hash
          FROM ledger v WHERE v.kind = '{NAME}' AND v.object_id = e.id
          AND v.at <= {p("as_of")} ORDER BY v.version DESC LIMIT 1) l
        CROSS JOIN LATERAL jsonb_to_record(l.state) AS s({_STATE_COLUMNS})) g"""


_SELECT = ", ".join(f"g.{c}" for c in COLUMNS)


@dataclass(frozen=True)
class EdgesShape:
    """What of a listing's arguments changes its statement (`list_sql`)."""

    as_of: bool = False
    after: bool = False
    # The filters given, by their names in `FILTERS` (each the parameter of its name).
    filters: tuple[str, ...] = ()
    # includeExpired: the edges no longer valid at the instant read too.
    expired: bool = False


@dataclass(frozen=True)
class ConflictsShape:
    """What of the review queue's arguments changes its statement (`conflicts_sql`)."""

    after: bool
    # The queue's conflict states: one state is a constant of the statement, so its page
    # is read in its index's order and stops at the page's end.
    states: tuple[str, ...]


def _edge(row: Any) -> Edge:
    return Edge.from_row(row)


# -- edges(...) ------------------------------------------------------------------------

FILTERS = ("from_id", "to_id", "type", "namespace", "note_from", "note_to")
# `related`'s ends: the edges out of (into) a note, by the end its records are at.
NOTE_ENDS = {"note_from": ("from_id", "to_id"), "note_to": ("to_id", "from_id")}


def bind_list(
    values: dict[str, Any],
    prefix: str,
    lanes: Sequence[str],
    given: Mapping[str, str | None],
    as_of: datetime | None,
    include_expired: bool,
    after: str | None,
) -> EdgesShape:
    """Put the values `list_sql` takes in `values` (each name after `prefix`): the
    filters `given` (by their names in `FILTERS`; None: not given), refusing a cursor
    this list did not give; and say its shape."""
    key = time_cursor(after)
    filters = tuple(name for name in FILTERS if given.get(name) is not None)
    values[prefix + "lanes"] = list(lanes)
    values[prefix + "as_of"] = as_of
    for name in filters:
        values[prefix + name] = given[name]
    if key is not None:
        values[prefix + "after_at"], values[prefix + "after_id"] = key
    return EdgesShape(
        as_of=as_of is not None, after=key is not None, filters=filters, expired=include_expired
    )


def list_sql(p: Params, shape: EdgesShape) -> PageSql:
    """SQL: the edges `edges(...)` lists, every filter named in `shape` AND-ed (each the
    parameter of its name), oldest first (created_at, id), and their count."""
    at = p("as_of", "timestamptz") if shape.as_of else None
    lanes = p("lanes", "text[]")
    where = [RULE.edge("g", lanes, at, shape.expired)]
    for name in shape.filters:
        if name in NOTE_ENDS:
            # A note's edges to and from what is outside it: its own and its parts'.
            end, other = NOTE_ENDS[name]
            # An array built once for the statement, which probes `end`'s index.
            note = f"ARRAY{note_of(p(name), lanes, at)}"
            where.append(f"g.{end} = ANY({note}) AND g.{other} <> ALL({note})")
        else:
            where.append(f"g.{name} = {p(name)}")
    keyed = ""
    if shape.after:
        keyed = f"AND (g.created_at, g.id) > ({p('after_at', 'timestamptz')}, {p('after_id')})"
    source = edge_source(p, shape.as_of)
    page = f"""SELECT {_SELECT} FROM {source} WHERE {" AND ".join(where)} {keyed}
        ORDER BY g.created_at, g.id LIMIT {p("limit")}"""
    return PageSql(page, f"SELECT count(*) FROM {source} WHERE {' AND '.join(where)}")


@functools.cache
def _list_statement(shape: EdgesShape) -> Statement:
    p = Params()
    return page_rows(p, list_sql(p, shape), True)


async def list_edges(
    db: Reader,
    lanes: Sequence[str],
    *,
    from_id: str | None = None,
    to_id: str | None = None,
    type: str | None = None,
    namespace: str | None = None,
    as_of: datetime | None = None,
    include_expired: bool = False,
    first: int | None = None,
    after: str | None = None,
    note_from: str | None = None,
    note_to: str | None = None,
) -> Page[Edge]:
    """Typed edges with every given filter (AND-ed), oldest first, with their total;
    `note_from` (`note_to`): the edges out of (into) the note a record speaks for."""
    size = page_size(first)
    given = {
        "from_id": from_id,
        "to_id": to_id,
        "type": type,
        "namespace": namespace,
        "note_from": note_from,
        "note_to": note_to,
    }
    values: dict[str, Any] = {"limit": size + 1}
    shape = bind_list(values, "", lanes, given, as_of, include_expired, after)
    statement = _list_statement(shape)
    rows = await db.fetch(statement.text, *statement.args(values))
    return _page(rows, size, lambda e: [e.created_at.isoformat(), e.id])


def _page(rows: Sequence[Any], size: int, key: Any) -> Page[Edge]:
    found = [_edge(r) for r in rows if r["id"] is not None]
    items = found[:size]
    total = rows[0]["total"] if rows else 0
    end = encode_cursor(key(items[-1])) if items else None
    return Page(items, total, len(found) > size, end)


@functools.cache
def _by_id_statement(as_of: bool) -> Statement:
    p = Params()
    at = p("as_of", "timestamptz") if as_of else None
    return p.statement(
        f"SELECT {_SELECT} FROM {edge_source(p, as_of)} WHERE g.id = ANY({p('ids', 'text[]')}) "
        f"AND {RULE.edge('g', p('lanes', 'text[]'), at)}"
    )


async def edges_by_id(
    db: Reader, ids: Sequence[str], lanes: Sequence[str], as_of: datetime | None
) -> dict[str, Edge]:
    """The edges of `ids` the caller may see now (or as they were at `as_of`), by id."""
    if not ids:
        return {}
    statement = _by_id_statement(as_of is not None)
    values = {"ids": list(ids), "lanes": list(lanes), "as_of": as_of}
    return {e.id: e for e in map(_edge, await db.fetch(statement.text, *statement.args(values)))}


# -- conflicts(...) --------------------------------------------------------------------

CONFLICT_STATUSES = {
    "UNRESOLVED": (UNRESOLVED,),
    "RESOLVED": (RESOLVED,),
    "ALL": (UNRESOLVED, RESOLVED),
}


# Unresolved first, each part oldest first.
CONFLICT_RANK = f"(g.conflict_state = '{RESOLVED}')::int"


def bind_conflicts(
    values: dict[str, Any],
    prefix: str,
    lanes: Sequence[str],
    status: str,
    chosen: Sequence[str],
    after: str | None,
) -> ConflictsShape:
    """Put the values `conflicts_sql` takes in `values` (each name after `prefix`):
    the states of `status` (a key of `CONFLICT_STATUSES`), the lanes chosen, refusing a
    cursor the queue did not give; and say its shape."""
    key = conflict_cursor(after)
    values[prefix + "lanes"] = list(lanes)
    values[prefix + "chosen"] = list(chosen)
    if key is not None:
        values[prefix + "after_rank"], values[prefix + "after_at"], values[prefix + "after_id"] = (
            key
        )
    return ConflictsShape(key is not None, CONFLICT_STATUSES[status])


def conflicts_sql(p: Params, shape: ConflictsShape) -> PageSql:
    """SQL: the review queue (the shape's `states`, `lanes`, `chosen`), each row with its
    `rank` (0: unresolved), in (rank, created_at, id) order, and its count.

    The states are written into the text, so that the queue of one state (its rank the
    same for every row) is read in the order of its index, `(conflict_state, created_at,
    id)`, up to the page's end, rather than all of it sorted."""
    states = ", ".join(f"'{state}'" for state in shape.states)
    where = (
        f"g.type = '{CONTRADICTS}' AND g.conflict_state IN ({states}) "
        f"AND {RULE.edge('g', p('lanes', 'text[]'), None)} "
        f"AND {RULE.lane('g', p('chosen', 'text[]'))}"
    )
    keyed = ""
    if shape.after:
        keyed = (
            f"AND ({CONFLICT_RANK}, g.created_at, g.id) > ({p('after_rank', 'int')}, "
            f"{p('after_at', 'timestamptz')}, {p('after_id')})"
        )
    order = (
        "g.created_at, g.id" if len(shape.states) == 1 else f"{CONFLICT_RANK}, g.created_at, g.id"
    )
    page = f"""SELECT {_SELECT}, {CONFLICT_RANK} AS rank FROM edges g WHERE {where} {keyed}
        ORDER BY {order} LIMIT {p("limit")}"""
    return PageSql(page, f"SELECT count(*) FROM edges g WHERE {where}")


@functools.cache
def _conflicts_statement(shape: ConflictsShape) -> Statement:
    p = Params()
    return page_rows(p, conflicts_sql(p, shape), True)


def conflict_cursor(after: str | None) -> tuple[int, datetime, str] | None:
    """The review queue's cursor (rank, created_at, id); refused if not one it gave out."""
    key = key_cursor(after, 3)
    if key is None:
        return None
    rank, at, ident = key
    try:
        when: datetime | None = datetime.fromisoformat(at).astimezone(UTC)
    except (ValueError, OverflowError):
        when = None
    if rank not in ("0", "1") or when is None or when.tzinfo is None:
        raise InvalidInputError(
            f"cursor '{(after or '')[:40]}' is not one this list gave out; pass a page's "
            "endCursor unchanged, or omit after"
        )
    return int(rank), when, ident


async def conflicts(
    db: Reader,
    lanes: Sequence[str],
    status: str,
    chosen: Sequence[str],
    first: int | None = None,
    after: str | None = None,
) -> Page[Edge]:
    """The review queue: live contradicts edges of the chosen lanes (their from
    records'), unresolved ones first, each part oldest first."""
    size = page_size(first)
    values: dict[str, Any] = {"limit": size + 1}
    shape = bind_conflicts(values, "", lanes, status, chosen, after)
    statement = _conflicts_statement(shape)
    rows = await db.fetch(statement.text, *statement.args(values))
    return _page(
        rows,
        size,
        lambda e: [str(int(e.conflict_state == RESOLVED)), e.created_at.isoformat(), e.id],
    )


# -- ego(...) --------------------------------------------------------------------------

MAX_HOPS = 2
MAX_EGO_LIMIT = 1000
DIRECTIONS = ("OUT", "IN", "BOTH")


def check_ego(hops: int, limit: int) -> None:
    if hops not in (1, 2):
        raise InvalidInputError(
            f"hops is {hops}; ego expands 1 or 2 hops. To go further, call ego again with "
            "the neighbors of the outermost hop as nodes (or use traverse for edge "
            "properties, up to depth 3)",
            allowed=[1, 2],
        )
    if not 1 <= limit <= MAX_EGO_LIMIT:
        raise InvalidInputError(
            f"limit must be between 1 and {MAX_EGO_LIMIT} (got {limit})",
            allowed=[1, MAX_EGO_LIMIT],
        )


@functools.cache
def _ego_statement(as_of: bool, direction: str) -> Statement:
    p = Params()
    at = p("as_of") if as_of else None
    # Every edge around the frontier that existed at T for this reader, and whether it
    # was still valid then (those that were not are the expired ones).
    seen = RULE.edge("g", p("lanes", "text[]"), at, include_expired=True)
    valid = RULE.edge_valid("g", at)
    nodes = p("nodes", "text[]")
    touching = {
        "OUT": f"g.from_id = ANY({nodes})",
        "IN": f"g.to_id = ANY({nodes})",
        "BOTH": f"(g.from_id = ANY({nodes}) OR g.to_id = ANY({nodes}))",
    }[direction]
    source = edge_source(p, as_of)
    return p.statement(
        f"SELECT {_SELECT}, ({valid}) AS valid FROM {source} WHERE {touching} AND {seen}"
    )


@dataclass
class Ego:
    """The neighbourhood: its edges with the hop each was reached at, the records they
    reach beyond the starting ones (by hop), and what was left out."""

    edges: list[tuple[int, Edge]] = field(default_factory=list)
    neighbors: list[str] = field(default_factory=list)
    expired_excluded: int = 0
    edges_clipped: int = 0
    type_filtered: int = 0
    dangling_ids: list[str] = field(default_factory=list)


async def ego(
    db: Reader,
    lanes: Sequence[str],
    nodes: Sequence[str],
    hops: int,
    direction: str,
    types: Sequence[str] | None,
    limit: int,
    as_of: datetime | None,
    include_expired: bool,
) -> Ego:
    """Breadth first from `nodes` (readable record ids) over typed edges, `hops` deep;
    edges sorted by hop, then weight (strongest first), then id, and clipped at
    `limit`; every edge left out counted by why. Edges to records the caller cannot
    read are never seen, so they are counted nowhere."""
    check_ego(hops, limit)
    statement = _ego_statement(as_of is not None, direction)
    found = Ego()
    chosen: dict[str, tuple[int, Edge]] = {}
    counted: set[str] = set()
    # A file's record starts from its note: its parts are where it starts too, and an
    # edge inside one note (a part to the next) is none of its links.
    note = await _notes(db, lanes, nodes, as_of)
    reached: dict[str, int] = dict.fromkeys(note, 0)
    frontier = list(note)
    for hop in range(1, hops + 1):
        if not frontier:
            break
        values = {"lanes": list(lanes), "nodes": frontier, "as_of": as_of}
        rows = await db.fetch(statement.text, *statement.args(values))
        following: list[str] = []
        for row in sorted(rows, key=lambda r: r["id"]):
            edge = _edge(row)
            if edge.id in counted:
                continue
            counted.add(edge.id)
            if note.get(edge.from_id, edge.from_id) == note.get(edge.to_id):
                continue
            if not row["valid"] and not include_expired:
                found.expired_excluded += 1
                continue
            if types is not None and edge.type not in types:
                found.type_filtered += 1
                continue
            chosen[edge.id] = (hop, edge)
            for end in (edge.from_id, edge.to_id):
                if end not in reached:
                    reached[end] = hop
                    following.append(end)
        frontier = following
    ordered = sorted(chosen.values(), key=lambda h: (h[0], -h[1].weight, h[1].id))
    found.edges = ordered[:limit]
    found.edges_clipped = len(ordered) - len(found.edges)
    shown = {end for _, e in found.edges for end in (e.from_id, e.to_id)}
    found.neighbors = [
        r
        for r, hop in sorted(reached.items(), key=lambda x: (x[1], x[0]))
        if hop > 0 and r in shown
    ]
    return found


@functools.cache
def _notes_statement(as_of: bool) -> Statement:
    p = Params()
    at = p("as_of", "timestamptz") if as_of else None
    note = note_of("x.id", p("lanes", "text[]"), at)
    return p.statement(
        f"SELECT x.id AS node, n.id FROM unnest({p('nodes', 'text[]')}) AS x(id) "
        f"CROSS JOIN LATERAL {note} AS n(id)"
    )


async def _notes(
    db: Reader, lanes: Sequence[str], nodes: Sequence[str], as_of: datetime | None
) -> dict[str, str]:
    """Each starting node and each part of a note it speaks for, by the node it is of."""
    statement = _notes_statement(as_of is not None)
    values = {"lanes": list(lanes), "nodes": list(dict.fromkeys(nodes)), "as_of": as_of}
    note = {n: n for n in dict.fromkeys(nodes)}
    for row in await db.fetch(statement.text, *statement.args(values)):
        note.setdefault(row["id"], row["node"])
    return note
