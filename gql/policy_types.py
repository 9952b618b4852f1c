"""The GraphQL types of the caller's profile and of policy versions."""

from __future__ import annotations

from datetime import datetime

import strawberry

from policies.model import Lane as LaneModel
from policies.model import Policy
from store.kinds.policy.in_force import PolicyVersion as PolicyVersionModel


@strawberry.type(description="A label a source type allows; `values` null means any value.")
class LabelRule:
    label: str
    values: list[str] | None


@strawberry.type(description="A source type a lane offers, with what its records may carry.")
class SourceTypeInfo:
    name: str
    authority: str
    labels: list[LabelRule] | None = strawberry.field(
        description="The labels allowed; null on an open lane, where any label is allowed."
    )
    content_format: str | None
    required_keys: list[str]


@strawberry.type(description="One lane the caller may read or write.")
class LaneAccess:
    lane: str
    readable: bool
    writable: bool
    open: bool = strawberry.field(description="True when the lane declares no source types.")
    source_types: list[SourceTypeInfo] = strawberry.field(
        description="For a writable lane, the source types it offers (empty if not writable)."
    )


@strawberry.type(description="Who the caller is and where it may read and write.")
class Profile:
    agent: str
    read_lanes: list[str]
    write_lanes: list[str]
    can_apply_policy: bool
    policy_version: int
    lanes: list[LaneAccess]

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
    version: int
    yaml: str
    applied_at: datetime
    applied_by: str

    @classmethod
    def from_domain(cls, p: PolicyVersionModel) -> PolicyVersion:
        return cls(version=p.version, yaml=p.yaml, applied_at=p.applied_at, applied_by=p.applied_by)
