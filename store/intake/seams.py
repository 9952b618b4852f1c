"""Where intake meets the kinds it does not own: typed edges and record retirement.

Intake writes detected edges with the typed-edge kind's commands (upsert, retire) and
retires the records of removed files and parts with the record kind's retirement;
this module is the one place that names them. Until those commands exist, `Kinds`
says so (`edges`, `retirement` False): intake then detects and reports edges and
removed files, writes neither, and a later run writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.intake.detect import Edge
from store.ledger.command import Command
from store.reads.snapshot import Reader

NAMESPACE = "intake"


@dataclass(frozen=True)
class LiveEdge:
    """A detected edge intake wrote earlier and that holds now."""

    id: str
    from_id: str
    to_id: str
    detector: str  # name@version
    evidence: Any


class Kinds:
    """The commands and reads intake uses from other kinds (none yet)."""

    edges = False
    retirement = False

    async def live_edges(
        self, db: Reader, lanes: Sequence[str], record_ids: Sequence[str]
    ) -> list[LiveEdge]:
        """The detected edges from these records that hold now."""
        return []

    def upsert_edge(self, from_id: str, to_id: str, edge: Edge) -> Command[Any]:
        raise NotImplementedError("typed edges are not available")

    def retire_edge(self, edge_id: str) -> Command[Any]:
        raise NotImplementedError("typed edges are not available")

    def retire_record(self, record_id: str, reason: str) -> Command[Any]:
        raise NotImplementedError("retiring records is not available")


KINDS = Kinds()
