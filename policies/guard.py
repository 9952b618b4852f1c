"""Pure decisions on whether a call may proceed under a policy.

Each check returns quietly (or with the stamp to write) or raises a `PolicyError`
whose message names what is allowed, so an agent learns the map from the refusal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from policies.errors import (
    ContentFormatError,
    EmbeddingError,
    EraseForbiddenError,
    ExpiryError,
    HiddenMemberError,
    LabelNotAllowedError,
    LaneForbiddenError,
    NotReadableError,
    PolicyApplyForbiddenError,
    RequiredKeysError,
    ReservedLabelError,
    SourceTypeNotAllowedError,
    ValueNotAllowedError,
    VectorSizeError,
)
from policies.model import (
    BUILTIN_SOURCE_TYPES,
    DEFAULT_SOURCE_TYPE,
    AgentProfile,
    Embedding,
    Lane,
    Policy,
    SourceType,
)
from policies.properties import RESERVED_PREFIX, Property, is_reserved_label


@dataclass(frozen=True)
class Stamp:
    """What the engine writes on an accepted record: its lane, source type and authority."""

    lane: str
    source_type: str
    authority: str


@dataclass(frozen=True)
class RecordChange:
    """What one command changes on one record: all the guard decides on.

    `new` records are checked whole. For an existing record only what the change
    writes is checked (the content when it changes, the properties it adds), so a
    value the change does not touch never refuses it: a record that a tightened
    policy would no longer accept can still be edited, and removals always pass.
    `engine` marks changes the engine makes (connections, groups, adjustments),
    the only ones that may carry reserved labels.
    """

    lane: str
    source_type: str | None
    new: bool = False
    content: str | None = None
    added: tuple[Property, ...] = ()
    removed: tuple[Property, ...] = ()
    add_only: bool = False
    engine: bool = False
    authority: str | None = None
    # The size of the vector the change writes (None: it writes none).
    embedding: int | None = None


@dataclass(frozen=True)
class SetChange:
    """A change to a connection, group or adjustment chain, as a whole: the lanes of the
    records it joins that the caller may read, and how many it joins that it may not.

    Decided besides the `RecordChange` of each record the change writes: a change to a
    set is a change to every record on it, written or not.
    """

    what: str  # "connection", "group", "adjustment chain"
    ident: str
    lanes: tuple[str, ...]
    hidden: int = 0


@dataclass(frozen=True)
class ObjectChange:
    """A change to a ledgered object of a kind that is not a record (a typed edge, a kind
    to come), in the lane it lives in: decided on write access to that lane, the rule
    every write obeys; a kind with rules of its own checks them beside this one."""

    kind: str
    object_id: str
    lane: str


@dataclass(frozen=True)
class EdgeChange:
    """A change to a typed edge: the lanes of the records it joins, and how the caller
    named what it changes (`kind`, `ident`: the edge, or the endpoint that is missing
    when the edge is new), so a refusal reads as if the unreadable did not exist."""

    kind: str
    ident: str
    from_lane: str
    to_lane: str


@dataclass(frozen=True)
class PolicyChange:
    """A new policy version proposed by an agent (None: by the operator)."""

    agent: str | None


def decide(policy: Policy, agent: AgentProfile, change: RecordChange) -> Stamp:
    """Allow a change to one record (returning how to stamp it) or raise a refusal.

    One pure function of the policy, the caller's profile and what the change
    writes; every write command asks it, once per record it touches.
    """
    if not change.engine:
        check_caller_properties([*change.added, *change.removed])
    # The lane is resolved once here and handed to every check below.
    lane = check_write_lane(policy, agent, change.lane)
    if change.new:
        stamp = _check_record(lane, change.source_type, change.content or "", change.added)
        if change.embedding is not None:
            check_embedding(lane, change.embedding)
        return stamp
    if change.embedding is not None:
        check_embedding(lane, change.embedding)
    kept = Stamp(change.lane, change.source_type or DEFAULT_SOURCE_TYPE, change.authority or "")
    if lane.is_open:
        return kept
    chosen = lane.enabled_source_type(kept.source_type)
    written = [prop for prop in change.added if not prop.reserved]
    if change.add_only or chosen is None:
        # addProperties checks the lane's combined labels, not values; so does any
        # change to a record whose type the policy in force no longer offers.
        _check_added_labels(lane, [prop.label for prop in written])
        return kept if chosen is None else Stamp(change.lane, chosen.name, chosen.authority)
    _check_labels(lane, chosen, written)
    _check_values(lane, chosen, written)
    if change.content is not None and chosen.content_format == "json":
        _check_json(lane, chosen, change.content)
    return Stamp(change.lane, chosen.name, chosen.authority)


def decide_object(policy: Policy, agent: AgentProfile, change: ObjectChange) -> None:
    """Allow a change to a ledgered object of any kind, or raise a refusal."""
    check_write_lane(policy, agent, change.lane)


def decide_edge(policy: Policy, agent: AgentProfile, change: EdgeChange) -> None:
    """Allow a change to a typed edge or raise: the caller must read both records it
    joins (else the edge does not exist for it) and write the from record's lane."""
    readable = agent.readable_lanes(policy)
    if change.from_lane not in readable or change.to_lane not in readable:
        raise NotReadableError(change.kind, change.ident)
    check_write_lane(policy, agent, change.from_lane)


def decide_set(policy: Policy, agent: AgentProfile, change: SetChange) -> None:
    """Allow a change to a set of records or raise a refusal: the caller must be able to
    read and write every record the set joins (hidden ones are not named)."""
    if change.hidden:
        readable = agent.readable_lanes(policy)
        changeable = [lane for lane in readable if agent.can_write(lane)]
        raise HiddenMemberError(change.what, change.ident, changeable)
    for lane in sorted(set(change.lanes)):
        check_write_lane(policy, agent, lane)


def decide_policy(policy: Policy | None, change: PolicyChange) -> None:
    """Allow a new policy version or raise: an agent needs `apply_policy`."""
    if policy is not None and change.agent is not None:
        check_apply_policy(policy, policy.agent(change.agent))


def check_embedding(lane: Lane, size: int) -> None:
    """Refuse a vector of another size than the one `lane` declares (or any vector, when
    it declares none)."""
    declared = lane.embedding
    if declared is None or declared.dimensions != size:
        raise EmbeddingError(
            lane.name,
            size,
            None if declared is None else declared.dimensions,
            None if declared is None else declared.model,
        )


@dataclass(frozen=True)
class Expiry:
    """What a write asks of a record's expiry: an instant (`at`), to expire it at once
    (`now`), or nothing (a new record takes its lane's lifetime, a changed one keeps
    its expiry)."""

    at: datetime | None = None
    now: bool = False

    @property
    def asked(self) -> bool:
        return self.at is not None or self.now


NO_EXPIRY = Expiry()


def decide_expiry(at: datetime, asked: Expiry, kept: datetime | None = None) -> datetime | None:
    """When a record written at `at` expires (None: never), or a refusal: an
    instant asked must come after `at` (the past is not rewritten), unless the caller asks
    to expire it at once, which expires it at `at`. Asking nothing keeps `kept` (a
    record's expiry before the write), or for a new record (`kept` None) gives it the
    lane's lifetime from `at`."""
    if asked.now:
        if asked.at is not None and asked.at > at:
            raise ExpiryError(asked.at, at, expire_now=True)
        return at
    if asked.at is not None:
        if asked.at <= at:
            raise ExpiryError(asked.at, at, expire_now=False)
        return asked.at
    return kept


def lane_expiry(lane: Lane, at: datetime, asked: Expiry) -> datetime | None:
    """`decide_expiry` for a new record: its lane's lifetime when the caller asks none."""
    if not asked.asked and lane.ttl is not None:
        return at + lane.ttl
    return decide_expiry(at, asked)


def vector_lanes(embeddings: Mapping[str, Embedding], lanes: Sequence[str], size: int) -> list[str]:
    """The lanes among `lanes` (those a search covers) whose vectors a search vector of
    `size` numbers is compared with: those declaring that size, all of one model; else
    a refusal naming the embeddings of the lanes searched."""
    declared = {lane: embeddings[lane] for lane in lanes if lane in embeddings}
    fit = sorted(lane for lane, e in declared.items() if e.dimensions == size)
    if not fit or len({declared[lane].model for lane in fit}) > 1:
        raise VectorSizeError(size, {k: (e.dimensions, e.model) for k, e in declared.items()})
    return fit


def check_write_lane(policy: Policy, agent: AgentProfile, lane: str) -> Lane:
    """Refuse a write to a lane the policy does not declare or the agent may not write;
    else the declared lane, for the checks that follow."""
    return _writable(policy, agent, policy.lane(lane))


def _writable(policy: Policy, agent: AgentProfile, lane: Lane) -> Lane:
    if not agent.can_write(lane.name):
        raise LaneForbiddenError(agent.name, lane.name, "write", agent.writable_lanes(policy))
    return lane


def check_apply_policy(policy: Policy, agent: AgentProfile) -> None:
    """Refuse `applyPolicy` to an agent whose profile lacks `apply_policy`."""
    if not agent.apply_policy:
        raise PolicyApplyForbiddenError(agent.name, policy.policy_appliers())


def check_erase(policy: Policy, agent: AgentProfile, lane: str) -> None:
    """Refuse `eraseRecord` to an agent whose profile lacks `erase`, or that may not write
    the record's lane."""
    if not agent.erase:
        raise EraseForbiddenError(agent.name, policy.erasers())
    check_write_lane(policy, agent, lane)


def check_caller_properties(properties: Sequence[Property]) -> None:
    """Refuse a caller's ingest or update that passes labels reserved for the engine."""
    reserved = sorted({prop.label for prop in properties if prop.reserved})
    if reserved:
        raise ReservedLabelError(reserved, RESERVED_PREFIX)


def check_record(
    policy: Policy,
    agent: AgentProfile,
    lane: str,
    source_type: str | None,
    content: str,
    properties: Sequence[Property],
) -> Stamp:
    """Check a record about to be written (ingest, ingestMany, update) and say how to stamp it.

    `properties` is the record's whole property set as it will be written; reserved
    labels among them are the engine's and are not checked here (callers refuse them
    from agents with `check_caller_properties`). On a closed lane the checks run in
    this order: source type, labels, values, content format, required keys.
    """
    return _check_record(check_write_lane(policy, agent, lane), source_type, content, properties)


def _check_record(
    lane: Lane, source_type: str | None, content: str, properties: Sequence[Property]
) -> Stamp:
    name = DEFAULT_SOURCE_TYPE if source_type is None else source_type
    if lane.is_open:
        if name not in BUILTIN_SOURCE_TYPES:
            raise SourceTypeNotAllowedError(lane.name, name, BUILTIN_SOURCE_TYPES, lane_open=True)
        return Stamp(lane=lane.name, source_type=name, authority=name)
    chosen = _closed_source_type(lane, name)
    written = [prop for prop in properties if not prop.reserved]
    _check_labels(lane, chosen, written)
    _check_values(lane, chosen, written)
    if chosen.content_format == "json":
        _check_json(lane, chosen, content)
    return Stamp(lane=lane.name, source_type=chosen.name, authority=chosen.authority)


def check_added_labels(
    policy: Policy, agent: AgentProfile, lane: str, labels: Sequence[str]
) -> None:
    """Check labels for addProperties against the lane's combined label list.

    Values are not checked. Reserved labels are skipped: addProperties reports them
    under `rejected` rather than refusing the call.
    """
    _check_added_labels(check_write_lane(policy, agent, lane), labels)


def _check_added_labels(lane: Lane, labels: Sequence[str]) -> None:
    if lane.is_open:
        return
    allowed = lane.combined_labels()
    offending = sorted({label for label in labels if not is_reserved_label(label)} - set(allowed))
    if offending:
        raise LabelNotAllowedError(lane.name, None, offending, allowed)


def _closed_source_type(lane: Lane, name: str) -> SourceType:
    chosen = lane.enabled_source_type(name)
    if chosen is None:
        raise SourceTypeNotAllowedError(
            lane.name, name, lane.enabled_source_types(), lane_open=False
        )
    return chosen


def _check_labels(lane: Lane, source_type: SourceType, properties: Sequence[Property]) -> None:
    allowed = source_type.allowed_labels()
    offending = sorted({prop.label for prop in properties} - set(allowed))
    if offending:
        raise LabelNotAllowedError(lane.name, source_type.name, offending, allowed)


def _check_values(lane: Lane, source_type: SourceType, properties: Sequence[Property]) -> None:
    for prop in properties:
        rule = source_type.rule(prop.label)
        if rule is not None and rule.values is not None and prop.value not in rule.values:
            raise ValueNotAllowedError(
                lane.name, source_type.name, prop.label, prop.value, rule.values
            )


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _check_json(lane: Lane, source_type: SourceType, content: str) -> None:
    try:
        # NaN and Infinity are Python's extension, not JSON
        document: object = json.loads(content, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        detail = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise ContentFormatError(lane.name, source_type.name, detail) from exc
    except ValueError as exc:
        raise ContentFormatError(lane.name, source_type.name, str(exc)) from exc
    except RecursionError as exc:
        raise ContentFormatError(lane.name, source_type.name, "nested too deeply") from exc
    required = sorted(source_type.required_keys)
    if not required:
        return
    if not isinstance(document, dict):
        raise RequiredKeysError(
            lane.name, source_type.name, required, got_kind=_json_kind(document)
        )
    missing = sorted(set(required) - document.keys())
    if missing:
        raise RequiredKeysError(lane.name, source_type.name, required, missing=missing)
