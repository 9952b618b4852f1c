"""The MCP server: every tool with its description, in the schema's words."""

from __future__ import annotations

import difflib
import inspect
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations

from gql import edgeloom_version
from gql.mcp import describe as d
from gql.mcp.edge_tools import EDGE_TOOLS, EdgeTools
from gql.mcp.run import bad_input
from gql.mcp.tools import PAGE_SHAPE, Gate


def _ingest(name: str) -> str:
    return d.field("IngestInput", name)


def _describe(tool: str) -> str:
    """Each tool's description: what it is for, then the operations it runs, in the
    schema's words."""
    said = {
        "e_ingest": "Write records into memory (one with content, many with records). "
        + d.field("Mutation", "ingest")
        + " Returns the record's id, lane, source_type, version, properties and warnings "
        "(a new value near one in use: correct it if you meant that one) ({records: [...]} "
        "for many). " + _ingest("properties"),
        "e_gather": "Find records by their edge properties: intersect (every one), union "
        "(any one), timeline (any one, in time order), or traverse (walk from one record "
        "over what it shares and the typed edges that join it to others). Returns a page of "
        "records (id, lane, source_type, content, properties); traverse returns {items: "
        "[{hop, via, record, edge}], not_shown, beyond_limit, clipped} (edge: the typed edge "
        "a record was reached by, else null). " + PAGE_SHAPE,
        "e_search": "Find records by asking in your own words: pass the question or keywords "
        "as text, as you would say them (no operators, no need to guess exact wording; every "
        "word counts, none is required), and/or a vector (of the size the lane's policy "
        "declares), best first, optionally only among a gather's records (match): "
        + d.field("Query", "search")
        + " Returns a page of {id, lane, score, text_rank, vector_rank, snippet (the content "
        "around the first word matched), matched (the query's words it holds), properties}, "
        "with terms (the words searched for), dropped (words too common to search by) and, "
        "when nothing was found, a hint of what to try; read a hit whole with e_read. "
        + PAGE_SHAPE,
        "e_read": "Read one record by id: "
        + d.field("Query", "record")
        + " Returns its content, properties, version, connections, groups, adjustments and "
        "corrections; with versions, a page of its history.",
        "e_update": d.field("Mutation", "update")
        + " Returns the record's id, lane, source_type, version and properties.",
        "e_property": "List the labels in use or a label's values (values, with similar_to: "
        "those near a value you are about to write), or change a record's edge properties and "
        "asserted edges (connect, group). Returns a page of {label, record_count} for list; "
        "of {property, member_count} for values; "
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


RECORD_TOOLS = (
    "e_ingest",
    "e_gather",
    "e_search",
    "e_read",
    "e_update",
    "e_property",
    "e_audit",
    "e_system",
)
WRITES = {"e_ingest", "e_update", "e_property", "edge_upsert", "conflict_resolve", "retire"}


def unknown_arguments(tool: str, given: Sequence[str], known: Sequence[str]) -> str | None:
    """The refusal of arguments `tool` does not take, naming the closest it does (as
    GraphQL does), or None when it takes them all."""
    unknown = [a for a in given if a not in known]
    if not unknown:
        return None
    # A lower cutoff than difflib's own: the seed's `lane` is the tools' `assign_lane`.
    closest = difflib.get_close_matches(unknown[0], known, n=1, cutoff=0.5)
    hint = f" (did you mean '{closest[0]}'?)" if closest else ""
    return (
        f"{tool} takes no argument {', '.join(repr(a) for a in unknown)}{hint}; "
        f"its arguments are {sorted(known)}"
    )


class ToolServer(MCPServer[Any]):
    """The SDK's server, refusing a call with an argument its tool does not take: the
    SDK would drop it silently, and the call would run without what the caller meant."""

    def __init__(self, arguments: Mapping[str, Sequence[str]], **kw: Any) -> None:
        super().__init__(**kw)
        self.arguments = arguments

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        known = self.arguments.get(name)
        refusal = None if known is None else unknown_arguments(name, list(arguments), known)
        if refusal is not None:
            return bad_input(refusal, allowed=sorted(known or ())).result()
        return await super().call_tool(name, arguments, context)


def _arguments(tool: Any) -> list[str]:
    """A tool's arguments, as its function declares them (its MCP context aside)."""
    return [p for p in inspect.signature(tool).parameters if p != "ctx"]


def build_server(gate: Gate, name: str = "edgeloom") -> MCPServer[Any]:
    """The MCP server with every tool, each call going through `gate`."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    tools = EdgeTools(gate)
    described = {name: _describe(name) for name in RECORD_TOOLS} | EDGE_TOOLS
    server = ToolServer(
        {tool_name: _arguments(getattr(tools, tool_name)) for tool_name in described},
        name=name,
        version=edgeloom_version(),
        instructions=(
            "edgeloom is an exact, auditable, shared memory. Call e_system get_profile first, "
            "then e_property list to reuse labels before inventing one. " + d.type_("Mutation")
        ),
    )
    # The SDK configures the root logger when a server is made; the gateway's logging
    # stays the gateway's (edgeloom serve sets it up; tests keep pytest's).
    root.handlers[:] = handlers
    root.setLevel(level)
    for tool_name, description in described.items():
        server.add_tool(
            getattr(tools, tool_name),
            name=tool_name,
            description=description,
            annotations=ToolAnnotations(read_only_hint=tool_name not in WRITES),
        )
    return server
