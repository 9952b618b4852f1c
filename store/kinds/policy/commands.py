"""Applying a policy: a command on the executor like every other write.

A policy version is a ledger entry of kind "policy" (state: its YAML), chained to
the previous version; the projection `policy_versions` and the head follow it.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.guard import PolicyChange, decide_policy
from policies.loader import load_policy
from store.kinds.policy.in_force import PolicyCache, PolicyVersion
from store.ledger.command import Applied, Current, Event, Locks, Plan, Txn, Write

POLICY = ("policy", "policy")


@dataclass(frozen=True)
class ApplyPolicy:
    """Validate a policy and make it the one in force; the same text again is a no-op.

    `agent` names the calling agent, who must be allowed to apply policy under the
    policy in force; the operator (serve --policy) passes None.
    """

    yaml: str
    source: str
    agent: str | None
    cache: PolicyCache

    def locks(self) -> Locks:
        return Locks(policy_exclusive=True, heads=(POLICY,))

    def decide(self, txn: Txn, current: Current[object]) -> Plan[PolicyVersion]:
        in_force = txn.policy
        # The executor reads the policy in force from this kind's cache.
        assert in_force is None or isinstance(in_force, PolicyVersion)
        # Permission first: a caller who may not apply a policy learns nothing from
        # having its text validated.
        decide_policy(None if in_force is None else in_force.policy, PolicyChange(self.agent))
        policy = load_policy(self.yaml, self.source)
        if in_force is not None and in_force.yaml == self.yaml:
            return Plan((), lambda _: in_force)
        head = current.heads.get(POLICY)
        version = 1 if head is None else head.version + 1
        payload = {"version": version, "previousVersion": 0 if head is None else head.version}
        write = Write(
            kind="policy",
            object_id="policy",
            event="policy_applied",
            state={"yaml": self.yaml},
            previous=head,
            events=(Event("policy_applied", payload),),
        )

        def result(applied: Applied[object]) -> PolicyVersion:
            [entry] = applied.entries
            made = PolicyVersion(entry.version, self.yaml, entry.at, entry.actor, policy)
            self.cache.remember(made)
            return made

        return Plan((write,), result)
