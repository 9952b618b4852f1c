"""Erasing a record: eraseRecord.

Retiring forgets a record by time (every earlier read still shows it); erasing removes
its content from every version. The erasure is the record's next version, event
`sr_erased`, a tombstone whose state holds no content and, under `erased`, why, whether
the edge properties were kept, and every entry it erased with the hash that entry
carries. In the same transaction (`Plan.rewrite`) the entries it names are rewritten to
their erased form (no content, no vector, no edge property unless the lane's policy
says its properties are not personal: `properties_personal: false`; the engine's
connections, groups and chains, which are ids, stay), as is every entry of another kind
attached to it that quotes it (`Kind.erased`: a typed edge's evidence, a correction's content
and reason); their events' payloads become `{"erased": ...}`; the
record's words, vectors, tags and memberships are written again from the erased
entries; and the search statistics and value counts it alone held are dropped.

The ledger and the audit events refuse every UPDATE but exactly this one, which the
database checks itself (migration 0031): an entry changes only while an `sr_erased`
entry of the same transaction names it by kind, id, version and hash. An entry of hash
format 3 still checks after it (its hash covers its state's digest); an older one is
attested by the erasure entry (`store.ledger.erasure`).

Only an agent whose profile has `erase: true` may erase, and only a record it may read
and write; a record it may not read is not found; erasing an erased record is refused
naming the erasure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from policies.guard import check_erase
from store.errors import AlreadyErasedError, InvalidInputError
from store.ids import RECORD_KIND
from store.kinds.record import counts, vectors, words
from store.kinds.record.locks import Records, RecordsRead
from store.kinds.record.model import Erased, Record, RecordState, Retired, next_version
from store.kinds.record.retire import MAX_REASON_CHARS, retired_with
from store.ledger.command import Applied, Current, Event, Locks, Plan, Txn, Write
from store.ledger.entry import Entry
from store.ledger.registry import kind_of, kinds
from store.limits import check_storable
from store.pool import Conn
from store.reads.visibility import RULE

EVENT = "sr_erased"

_INSERT_MEMBERSHIPS = """
INSERT INTO edge_properties (id, record_id, lane, label, value, recorded_from, recorded_to,
                             from_version, to_version)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                     $6::timestamptz[], $7::timestamptz[], $8::int[], $9::int[])
"""
_INSERT_TAGS = "INSERT INTO record_tags (record_id, lane, tags) VALUES ($1, $2, $3)"
_ENTRIES = """
SELECT kind, object_id, version, event, actor, at, policy_version, state, prev_hash, hash,
       state_sha256
FROM ledger WHERE kind = 'record' AND object_id = $1 ORDER BY version
"""


def erasure_ref(kind: str, object_id: str, version: int) -> str:
    """How an erased entry, its events and `verify` name the erasure entry."""
    return f"{kind}:{object_id}:{version}"


def erased_record_state(state: RecordState, keep_properties: bool) -> RecordState:
    """A record state without its content: no text, no vector, and no edge property or
    metadata unless kept (the engine's connections, groups and chains always stay)."""
    kept = tuple(
        p
        for p in state.properties
        if (keep_properties and not RULE.is_metadata(p.label))
        or (p.reserved and not RULE.is_metadata(p.label))
    )
    return replace(state, content="", properties=kept, embedding=None)


def _listed(entry: Entry) -> dict[str, Any]:
    return {"kind": entry.kind, "id": entry.object_id, "version": entry.version, "hash": entry.hash}


def _check_reason(reason: str) -> None:
    if not reason.strip():
        raise InvalidInputError(
            "reason is empty; say why the record is erased (for example: the person asked "
            "for their data to be deleted)"
        )
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidInputError(
            f"reason is {len(reason)} characters; at most {MAX_REASON_CHARS} are allowed",
            allowed=MAX_REASON_CHARS,
        )
    check_storable(reason)


@dataclass(frozen=True)
class _Rewrite:
    """What the erasure rewrites once its entry is appended."""

    record_id: str
    ref: str
    rewrites: list[dict[str, Any]]
    # Objects of other kinds whose newest entry it erases, by kind: their rows move too.
    newest: dict[str, list[str]]

    async def __call__(self, conn: Conn, applied: Applied[Any]) -> None:
        # The counts its tombstone moved are folded now, so that a word or value only
        # this record held is dropped with it rather than kept at zero.
        await counts.fold_in_transaction(conn)
        await conn.execute(
            "SELECT edgeloom_erase($1, $2, $3::jsonb)", self.ref, self.record_id, self.rewrites
        )
        for kind_name, ids in self.newest.items():
            kind = kind_of(kind_name)
            statement = None if kind is None else kind.erased_rows()
            if statement is not None:
                await conn.execute(statement, ids)
        await rebuild(conn, self.record_id)


async def rebuild(conn: Conn, record_id: str) -> None:
    """Write the record's memberships, tags, words and vectors again from its (erased)
    entries, by the rule verify and import replay."""
    from store.kinds.record.kind import KIND

    entries = [Entry.from_row(r) for r in await conn.fetch(_ENTRIES, record_id)]
    replay = KIND.replay(keep=False)
    memberships: list[tuple[Any, ...]] = []
    for table, row in replay.object(entries):
        if table == "edge_properties":
            memberships.append(row)
        elif table == "record_tags":
            await conn.execute(_INSERT_TAGS, *row)
    if memberships:
        await conn.execute(_INSERT_MEMBERSHIPS, *(list(c) for c in zip(*memberships, strict=True)))
    await words.insert(conn, replay.words)
    await vectors.insert(conn, replay.vectors)


def _attached_kinds() -> tuple[str, ...]:
    return tuple(kind.name for kind in kinds())


@dataclass(frozen=True)
class EraseRecord:
    """Erase a record's content from every version and from what was derived from it;
    its erasure entry (event `sr_erased`) names every entry it erased."""

    record_id: str
    reason: str

    def __post_init__(self) -> None:
        _check_reason(self.reason)

    def locks(self) -> Locks:
        locks = Records((self.record_id,), retired=True).locks(attached=_attached_kinds())
        return replace(locks, history=True)

    def decide(self, txn: Txn, current: Current[RecordsRead]) -> Plan[Record]:
        record = current.rows.record(self.record_id)
        check_erase(txn.rules, txn.agent, record.lane)
        done = record.state.erased
        if done is not None:
            raise AlreadyErasedError(record.id, record.updated_at, record.retired_by, done.reason)
        lane = txn.rules.lanes.get(record.lane)
        keep = lane is not None and not lane.properties_personal
        rewrites: list[dict[str, Any]] = []
        listed: list[dict[str, Any]] = []
        for entry in current.history.get((RECORD_KIND, record.id), ()):
            erased = erased_record_state(RecordState.from_json(entry.state), keep).to_json()
            rewrites.append({**_listed(entry), "state": erased})
            listed.append(_listed(entry))
        newest: dict[str, list[str]] = {}
        for (kind_name, object_id), entries in sorted(current.history.items()):
            kind = kind_of(kind_name)
            if kind_name == RECORD_KIND or kind is None:
                continue
            for entry in entries:
                erased_state = kind.erased(entry.state)
                if erased_state is None:
                    continue
                rewrites.append({**_listed(entry), "state": erased_state})
                listed.append(_listed(entry))
                if entry is entries[-1]:
                    newest.setdefault(kind_name, []).append(object_id)
        state = replace(
            erased_record_state(record.state, keep),
            retired=Retired(self.reason),
            erased=Erased(self.reason, keep, tuple(listed)),
        )
        event = Event(EVENT, {"reason": self.reason})
        writes: list[Write] = [next_version(record, state, EVENT, [event])]
        if record.retirement is None:
            writes += [_without_evidence(w) for w in retired_with(txn, current, {record.id})]
        ref = erasure_ref(RECORD_KIND, record.id, record.version + 1)
        rewrite = _Rewrite(record.id, ref, rewrites, newest)
        return Plan(writes, lambda applied: applied.records[record.id], rewrite=rewrite)


def _without_evidence(write: Write) -> Write:
    """A typed edge retired with the erased record keeps no quote of it."""
    kind = kind_of(write.kind)
    state = None if kind is None else kind.erased(write.state)
    return write if state is None else replace(write, state=state)
