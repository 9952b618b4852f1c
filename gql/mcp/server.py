"""The MCP server: every tool with its description, in the schema's words."""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from gql.mcp import describe as d
from gql.mcp.edge_tools import EDGE_TOOLS, EdgeTools
from gql.mcp.tools import PAGE_SHAPE, Gate


def _ingest(name: str) -> str:
    return d.field("IngestInput", name)


def _describe(tool: str) -> str:
    """Each tool's description: what it is for, then the operations it runs, in the
    schema's words."""
    said = {
        "e_ingest": "Write records into memory (one with content, many with records). "
        + d.field("Mutation", "ingest")
        + " Returns the record's id, lane, source_type, version and properties ({records: "
        "[...]} for many). " + _ingest("properties"),
        "e_gather": "Find records by their edge properties: intersect (every one), union "
        "(any one), timeline (any one, in time order), or traverse (walk from one record "
        "over what it shares). Returns a page of records (id, lane, source_type, content, "
        "properties); traverse returns {items: [{hop, via, record}], not_shown, beyond_limit, "
        "clipped}. " + PAGE_SHAPE,
        "e_read": "Read one record by id: "
        + d.field("Query", "record")
        + " Returns its content, properties, version, connections, groups, adjustments and "
        "corrections; with versions, a page of its history.",
        "e_update": d.field("Mutation", "update")
        + " Returns the record's id, lane, source_type, version and properties.",
        "e_property": "List the labels in use, or change a record's edge properties and "
        "asserted edges (connect, group). Returns a page of {label, record_count} for list; "
        "{added, already_held, rejected, record} for add; {removed, not_held, record} for "
        "remove; the connection or group {id, hint, active, records} otherwise. " + PAGE_SHAPE,
        "e_audit": "The audit trail: list events (of one record, or of some kinds), inspect "
        "one with the record version before and after it, or poll the feed after a cursor. "
        + PAGE_SHAPE,
        "e_system": "get_profile: "
        + d.field("Query", "profile")
        + " Call it first: it names the lanes, source types and labels your writes may use.",
    }
    return said[tool]


RECORD_TOOLS = ("e_ingest", "e_gather", "e_read", "e_update", "e_property", "e_audit", "e_system")
WRITES = {"e_ingest", "e_update", "e_property", "edge_upsert", "conflict_resolve", "retire"}


def build_server(gate: Gate, name: str = "edgeloom") -> MCPServer[Any]:
    """The MCP server with every tool, each call going through `gate`."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    server: MCPServer[Any] = MCPServer(
        name,
        instructions=(
            "edgeloom is an exact, auditable, shared memory. Call e_system get_profile first, "
            "then e_property list to reuse labels before inventing one. " + d.type_("Mutation")
        ),
    )
    # The SDK configures the root logger when a server is made; the gateway's logging
    # stays the gateway's (edgeloom serve sets it up; tests keep pytest's).
    root.handlers[:] = handlers
    root.setLevel(level)
    tools = EdgeTools(gate)
    described = {name: _describe(name) for name in RECORD_TOOLS} | EDGE_TOOLS
    for tool_name, description in described.items():
        server.add_tool(
            getattr(tools, tool_name),
            name=tool_name,
            description=description,
            annotations=ToolAnnotations(read_only_hint=tool_name not in WRITES),
        )
    return server
