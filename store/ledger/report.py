"""What verify found: the counts it read and the problems, none when everything holds."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Report:
    """What verify found; `problems` is empty when everything holds."""

    records: int = 0
    entries: int = 0
    memberships: int = 0
    checkpoints: int = 0
    problems: list[str] = field(default_factory=list)
    # Entries whose content an erasure removed, each named with its erasure: not problems.
    erased: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems
