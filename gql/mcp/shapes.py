"""What the tools' arguments and results look like beyond the GraphQL documents: a record
to ingest in snake_case, the actions' required arguments, and pages of lists that GraphQL
answers whole."""

from __future__ import annotations

from typing import Any

from gql.mcp import describe as d
from gql.mcp.run import Refused, bad_input, refused
from store.errors import NotFoundError
from store.reads.pages import page_size


def _ingest(name: str) -> str:
    return d.field("IngestInput", name)


def item_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": _ingest("content")},
            "properties": {
                "type": "array",
                "items": {"type": "string"},
                "description": _ingest("properties"),
            },
            "source_type": {"type": "string", "description": _ingest("sourceType")},
            "assign_lane": {"type": "string", "description": _ingest("lane")},
            "adjusts": {
                "type": "array",
                "items": {"type": "string"},
                "description": _ingest("adjusts"),
            },
            "idempotency_key": {"type": "string", "description": _ingest("idempotencyKey")},
            "embedding": {
                "type": "array",
                "items": {"type": "number"},
                "description": _ingest("embedding"),
            },
            "expires_at": {
                "type": "string",
                "format": "date-time",
                "description": _ingest("expiresAt"),
            },
            "expire_now": {"type": "boolean", "description": _ingest("expireNow")},
        },
        "required": ["content"],
        "additionalProperties": False,
    }


INGEST_KEYS = {
    "content": "content",
    "properties": "properties",
    "source_type": "sourceType",
    "assign_lane": "lane",
    "adjusts": "adjusts",
    "idempotency_key": "idempotencyKey",
    "embedding": "embedding",
    "expires_at": "expiresAt",
    "expire_now": "expireNow",
}


def ingest_input(item: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(item) - set(INGEST_KEYS))
    if unknown:
        raise bad_input(
            f"unknown field(s) {unknown} in a record to ingest; allowed: {sorted(INGEST_KEYS)}",
            allowed=sorted(INGEST_KEYS),
        )
    return {INGEST_KEYS[k]: v for k, v in item.items() if v is not None}


def needs(action: str, tool: str, **given: object) -> None:
    missing = [name for name, value in given.items() if value is None]
    if missing:
        raise bad_input(f"{tool} action '{action}' needs {', '.join(missing)}", missing=missing)


def _offset(after: str | None) -> int:
    """An adapter-made page's cursor: the number of items before it."""
    if after is None:
        return 0
    if not after.isdigit() or len(after) > 9:
        raise bad_input(
            f"cursor {after[:40]!r} was not given by this list; pass a page's end_cursor "
            "back unchanged"
        )
    return int(after)


def page_of(items: list[Any], first: int, after: str | None) -> dict[str, Any]:
    """A page of a list GraphQL answers whole (labels, versions), in the pages' shape."""
    size = page_size(first)  # refused as the store's own pages refuse it
    start = _offset(after)
    chosen = items[start : start + size]
    end = start + len(chosen)
    return {
        "items": chosen,
        "total_count": len(items),
        "page_info": {
            "has_next_page": end < len(items),
            "end_cursor": str(end) if chosen else None,
        },
    }


def not_found(record_id: str) -> Refused:
    return refused(NotFoundError("record", record_id))


SNIPPET_CHARS = 160
"""About how much of a hit's content `e_search` shows, around its first matched word."""


def compact_hit(hit: dict[str, Any]) -> dict[str, Any]:
    """A search hit as a model reads it: id, score, ranks, a snippet of the content around
    the first matched word (with "..." where it is cut), the words matched, properties."""
    record = hit["record"]
    content: str = record["content"]
    marks = hit["highlights"]
    start = max(0, marks[0]["start"] - SNIPPET_CHARS // 3) if marks else 0
    end = min(len(content), start + SNIPPET_CHARS)
    snippet = content[start:end]
    snippet = ("..." if start > 0 else "") + snippet + ("..." if end < len(content) else "")
    return {
        "id": record["id"],
        "lane": record["lane"],
        "score": hit["score"],
        "text_rank": hit["text_rank"],
        "vector_rank": hit["vector_rank"],
        "snippet": snippet,
        "matched": hit["matched_terms"],
        "properties": record["properties"],
    }
