"""The policy kind's projection rule: a policy entry is one policy_versions row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from store.ledger.entry import Entry


@dataclass(frozen=True)
class PolicyRow:
    """One row of the policy_versions projection (and the head it moves to)."""

    version: int
    yaml: str
    applied_at: datetime
    applied_by: str

    def row(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "yaml": self.yaml,
            "applied_at": self.applied_at,
            "applied_by": self.applied_by,
        }


def project_policy(entry: Entry) -> PolicyRow:
    """A policy entry is one policy_versions row; the newest is the head."""
    return PolicyRow(entry.version, entry.state["yaml"], entry.at, entry.actor)
