"""The policy kind: one object, `policy`, whose versions are the policies applied."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.kinds.policy.in_force import HEAD_SQL
from store.kinds.policy.projection import PolicyRow, project_policy
from store.ledger.entry import Entry
from store.ledger.implied import Implied, Links, Shared
from store.ledger.registry import Copy, Cte, KindDefaults, RowWriter, Table, insert
from store.ledger.report import Report
from store.pool import Conn

NAME = "policy"
POLICY_EVENT_KINDS = ("policy_applied",)

_POLICIES = "SELECT version, yaml, applied_at, applied_by FROM policy_versions ORDER BY version"
_TYPED = (
    ("version", "int"),
    ("yaml", "text"),
    ("applied_at", "timestamptz"),
    ("applied_by", "text"),
)

_CTES = (
    Cte(
        "new_policies",
        insert("new_policies", "policy_versions", _TYPED).sql + "\n  RETURNING version",
        _TYPED,
    ),
    # The head follows the newest version this statement inserted.
    Cte(
        "moved_head",
        """UPDATE policy_head SET version = p.version
  FROM (SELECT max(version) AS version FROM new_policies) p
  WHERE id = 1 AND p.version IS NOT NULL""",
    ),
)


class _Replay:
    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.policies: list[PolicyRow] = []

    def object(self, entries: Sequence[Entry]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        for entry in entries:
            p = project_policy(entry)
            self.policies.append(p)
            yield "policy_versions", (p.version, p.yaml, p.applied_at, p.applied_by)

    async def compare(self, conn: Conn, report: Report) -> None:
        live = [PolicyRow(*row) for row in await conn.fetch(_POLICIES)]
        if live != self.policies:
            report.problems.append("policy_versions differs from the ledger's policy entries")
        head = await conn.fetchval(HEAD_SQL)
        newest = self.policies[-1].version if self.policies else 0
        if head != newest:
            report.problems.append(
                f"policy_head names version {head}; the ledger's newest is {newest}"
            )

    async def finish(self, conn: Conn, copy: Copy) -> None:
        await conn.execute(
            "UPDATE policy_head "
            "SET version = (SELECT coalesce(max(version), 0) FROM policy_versions)"
        )


@dataclass(frozen=True)
class PolicyKind(KindDefaults):
    name: str = NAME
    prefix: str = "policy"
    ctes: tuple[Cte, ...] = _CTES
    tables: tuple[Table, ...] = (
        Table("policy_versions", tuple(c for c, _ in _TYPED), grant="append"),
        Table("policy_head"),
    )
    event_kinds: tuple[str, ...] = POLICY_EVENT_KINDS
    unique_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def writer(self, before: Mapping[str, Any]) -> RowWriter:
        return RowWriter(project_policy, "new_policies")

    def replay(self, keep: bool) -> _Replay:
        return _Replay(keep)

    def implied(
        self, before: Mapping[str, Any] | None, entry: Entry, links: Links
    ) -> tuple[Shared, list[Implied]] | str:
        previous = None if entry.version == 1 else entry.version - 1
        payload = {"version": entry.version, "previousVersion": entry.version - 1}
        return Shared(None, None, previous), [Implied("policy_applied", payload)]


KIND = PolicyKind()
