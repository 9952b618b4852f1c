"""Where intake meets the kinds it does not own: typed edges and record retirement.

Intake writes detected edges with the typed-edge kind's commands (upsert, retire) and
retires the records of removed files and parts with the record kind's retirement; this
module is the one place that names them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.intake.detect import Edge
from store.kinds.edge.commands import RetireEdge, UpsertEdge
from store.kinds.edge.model import Edge as TypedEdge
from store.kinds.record.retire import RetireRecords
from store.ledger.command import Command
from store.reads.snapshot import Reader
from store.reads.statements import Params
from store.reads.visibility import RULE

NAMESPACE = "intake"
DETECTED = "detected"


@dataclass(frozen=True)
class LiveEdge:
    """A detected edge intake wrote earlier and that holds now."""

    id: str
    from_id: str
    to_id: str
    detector: str  # name@version
    evidence: Any


_LIVE = Params()
_LIVE_SQL = _LIVE.statement(
    f"""SELECT g.id, g.from_id, g.to_id, g.detector, g.evidence FROM edges g
    WHERE {RULE.edge("g", _LIVE("lanes", "text[]"), None)} AND g.expired_at IS NULL
      AND g.namespace = '{NAMESPACE}' AND g.provenance_type = '{DETECTED}'
      AND g.from_id = ANY({_LIVE("ids", "text[]")})
    ORDER BY g.id"""
)


class Kinds:
    """The commands and reads intake uses from other kinds."""

    edges = True
    retirement = True

    async def live_edges(
        self, db: Reader, lanes: Sequence[str], record_ids: Sequence[str]
    ) -> list[LiveEdge]:
        """The detected edges from these records that hold now."""
        if not record_ids:
            return []
        rows = await db.fetch(
            _LIVE_SQL.text, *_LIVE_SQL.args({"lanes": list(lanes), "ids": list(record_ids)})
        )
        return [
            LiveEdge(
                r["id"],
                r["from_id"],
                r["to_id"],
                r["detector"],
                json.loads(r["evidence"]) if isinstance(r["evidence"], str) else r["evidence"],
            )
            for r in rows
        ]

    def edges_written(self, results: Sequence[Any]) -> list[tuple[LiveEdge, bool]]:
        """The typed edges among a transaction's results, each with whether it holds."""
        return [
            (LiveEdge(r.id, r.from_id, r.to_id, r.detector, r.evidence), not r.retired)
            for r in results
            if isinstance(r, TypedEdge)
        ]

    def upsert_edge(self, from_id: str, to_id: str, edge: Edge) -> Command[Any]:
        d = edge.detector
        return UpsertEdge(
            from_id=from_id,
            to_id=to_id,
            type=d.name,
            namespace=NAMESPACE,
            weight=d.weight,
            confidence=d.confidence,
            provenance_type=DETECTED,
            evidence=dict(edge.evidence),
            detector=d.id,
        )

    def retire_edge(self, edge_id: str) -> Command[Any]:
        return RetireEdge(edge_id)

    def retire_records(self, record_ids: tuple[str, ...], reason: str) -> Command[Any]:
        # Their typed edges are retired with them, in the same transaction.
        return RetireRecords(record_ids, reason)


KINDS = Kinds()
