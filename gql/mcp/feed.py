"""The feed for MCP clients without a WebSocket: the `audit` query's events after a
cursor, cut where an event could still commit before them (store.feed.settled)."""

from __future__ import annotations

from typing import Any

from gql.api.session import Session
from gql.mcp import documents as doc
from gql.mcp.run import run
from store.feed.settled import settled_through
from store.reads.pages import position_cursor


async def settled(
    session: Session, kinds: list[str] | None, first: int, after: str
) -> dict[str, Any]:
    """A page of the events after `after` that no later commit can precede."""
    session.agent_name()  # an unauthenticated call is refused before any look
    horizon = await settled_through(session.services.pool, position_cursor(after))
    variables = {"kinds": kinds, "first": first, "after": after}
    page: dict[str, Any] = (await run(session, doc.AUDIT, variables))["audit"]
    kept = [e for e in page["items"] if int(e["cursor"]) <= horizon]
    if len(kept) < len(page["items"]):
        page["page_info"] = {
            "has_next_page": True,
            "end_cursor": kept[-1]["cursor"] if kept else after,
        }
    elif not kept:
        # Nothing readable up to the horizon: the next poll may start from there.
        more = page["page_info"]["has_next_page"]
        page["page_info"] = {"has_next_page": more, "end_cursor": str(max(horizon, 0))}
    page["items"] = kept
    return page
