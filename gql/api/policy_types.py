"""The GraphQL types of the caller's profile and of policy versions."""

from __future__ import annotations

from datetime import datetime

import strawberry

from policies.model import Lane as LaneModel
from policies.model import Policy
from store.kinds.policy.in_force import PolicyVersion as PolicyVersionModel


@strawberry.type(description="A label a source type allows; `values` null means any value.")
class LabelRule:
    label: str = strawberry.field(description="A label the source type allows.")
    values: list[str] | None = strawberry.field(
        description="The values it is closed to, in order; null when any value is allowed."
    )


@strawberry.type(description="A source type a lane offers, with what its records may carry.")
class SourceTypeInfo:
    name: str = strawberry.field(description="The source type, as source_type/sourceType takes it.")
    authority: str = strawberry.field(description="The authority stamped on its records.")
    labels: list[LabelRule] | None = strawberry.field(
        description="The labels allowed; null on an open lane, where any label is allowed."
    )
    content_format: str | None = strawberry.field(
        description="json when its content must parse as JSON; null for any text."
    )
    required_keys: list[str] = strawberry.field(
        description="Top-level keys its JSON content must have."
    )


@strawberry.type(description="One lane the caller may read or write.")
class LaneAccess:
    lane: str = strawberry.field(description="The lane name, as lane/lanes take it.")
    readable: bool = strawberry.field(description="Whether you may read it.")
    writable: bool = strawberry.field(description="Whether you may write it.")
    open: bool = strawberry.field(description="True when the lane declares no source types.")
    source_types: list[SourceTypeInfo] = strawberry.field(
        description="For a writable lane, the source types it offers (empty if not writable)."
    )


@strawberry.type(description="Who the caller is and where it may read and write.")
class Profile:
    agent: str = strawberry.field(description="Your agent name.")
    read_lanes: list[str] = strawberry.field(description="The lanes you may read.")
    write_lanes: list[str] = strawberry.field(description="The lanes you may write.")
    can_apply_policy: bool = strawberry.field(
        description="Whether you may apply a new policy (applyPolicy)."
    )
    policy_version: int = strawberry.field(description="The policy version these rights come from.")
    lanes: list[LaneAccess] = strawberry.field(
        description="Each lane you may read or write, with what you may write there."
    )

    @classmethod
    def from_domain(cls, policy: Policy, version: int, agent_name: str) -> Profile:
        agent = policy.agent(agent_name)
        readable = agent.readable_lanes(policy)
        writable = agent.writable_lanes(policy)
        lanes = [
            _lane_access(policy.lanes[name], name in readable, name in writable)
            for name in policy.lane_names()
            if name in readable or name in writable
        ]
        return cls(
            agent=agent.name,
            read_lanes=readable,
            write_lanes=writable,
            can_apply_policy=agent.apply_policy,
            policy_version=version,
            lanes=lanes,
        )


def _lane_access(lane: LaneModel, readable: bool, writable: bool) -> LaneAccess:
    offered = lane.offered_source_types() if writable else []
    return LaneAccess(
        lane=lane.name,
        readable=readable,
        writable=writable,
        open=lane.is_open,
        source_types=[
            SourceTypeInfo(
                name=st.name,
                authority=st.authority,
                labels=None
                if lane.is_open
                else [
                    LabelRule(label=r.label, values=list(r.values) if r.values else None)
                    for r in st.labels
                ],
                content_format=st.content_format,
                required_keys=list(st.required_keys),
            )
            for st in offered
        ],
    )


@strawberry.type(description="An applied policy version.")
class PolicyVersion:
    version: int = strawberry.field(description="The policy version, from 1.")
    yaml: str = strawberry.field(description="The policy as applied.")
    applied_at: datetime = strawberry.field(description="When it was applied.")
    applied_by: str = strawberry.field(description="Who applied it (an agent, or serve --policy).")

    @classmethod
    def from_domain(cls, p: PolicyVersionModel) -> PolicyVersion:
        return cls(version=p.version, yaml=p.yaml, applied_at=p.applied_at, applied_by=p.applied_by)
