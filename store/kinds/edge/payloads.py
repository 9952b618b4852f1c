"""The payloads of an edge's events, written from its entry and the one before it (so
`verify` recomputes each exactly). Every payload names both ends and the to record's
lane, `toLane`, by which the visibility rule shows the event only to a reader of both."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _base(state: Mapping[str, Any], edge_id: str) -> dict[str, Any]:
    return {
        "edgeId": edge_id,
        "fromId": state["from_id"],
        "toId": state["to_id"],
        "toLane": state["to_lane"],
        "type": state["type"],
        "namespace": state["namespace"],
    }


def changed(before: Mapping[str, Any] | None, state: Mapping[str, Any]) -> list[str]:
    """The fields (camelCase) an upsert changed; none for a new edge."""
    if before is None:
        return []
    return sorted(_camel(k) for k in state if before.get(k) != state[k])


def payload_for(
    event: str, before: Mapping[str, Any] | None, state: Mapping[str, Any], edge_id: str
) -> dict[str, Any] | None:
    """The payload of `event` for the edge's entry with `state` (None: no edge event)."""
    payload = _base(state, edge_id)
    if event == "edge_upserted":
        payload["created"] = before is None
        payload["changed"] = changed(before, state)
    elif event == "edge_retired":
        payload["invalidAt"] = state["invalid_at"]
    elif event == "conflict_resolved":
        payload["resolution"] = state["resolution"]
        payload["resolver"] = state["resolver"]
        payload["winnerId"] = state["winner_id"]
    else:
        return None
    return payload
