"""The typed-edge tools: upsert, list, related, the review queue and its resolution, ego,
and retiring an edge, each a fixed GraphQL document run as the caller, like the others."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult

from gql.api.session import Session
from gql.mcp import describe as d
from gql.mcp import documents as doc
from gql.mcp.run import bad_input, run
from gql.mcp.tools import PAGE_NOTE, TOOL_PAGE, Tools, described, mutation_arg, query_arg


def _edge(name: str) -> str:
    return d.field("EdgeInput", name)


def _stamp(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


EDGE_KEYS = {
    "weight": "weight",
    "namespace": "namespace",
    "provenance_actor": "provenanceActor",
    "provenance_type": "provenanceType",
    "evidence": "evidence",
    "conflict_state": "conflictState",
    "confidence": "confidence",
    "detector": "detector",
}


class EdgeTools(Tools):
    """Every tool: the record tools and the typed-edge ones."""

    async def edge_upsert(
        self,
        ctx: Context[Any, Any],
        from_id: Annotated[str, described(_edge("fromId"))],
        to_id: Annotated[str, described(_edge("toId"))],
        type: Annotated[str, described(_edge("type"))],
        weight: Annotated[float | None, described(_edge("weight"))] = None,
        namespace: Annotated[str | None, described(_edge("namespace"))] = None,
        provenance_actor: Annotated[str | None, described(_edge("provenanceActor"))] = None,
        provenance_type: Annotated[str | None, described(_edge("provenanceType"))] = None,
        evidence: Annotated[dict[str, Any] | list[Any] | None, described(_edge("evidence"))] = None,
        conflict_state: Annotated[str | None, described(_edge("conflictState"))] = None,
        confidence: Annotated[float | None, described(_edge("confidence"))] = None,
        detector: Annotated[str | None, described(_edge("detector"))] = None,
        valid_at: Annotated[datetime | None, described(_edge("validAt"))] = None,
    ) -> CallToolResult:
        given = locals()

        async def work(session: Session) -> Any:
            edge: dict[str, Any] = {"fromId": from_id, "toId": to_id, "type": type}
            edge |= {key: given[name] for name, key in EDGE_KEYS.items() if given[name] is not None}
            if valid_at is not None:
                edge["validAt"] = valid_at.isoformat()
            return (await run(session, doc.EDGE_UPSERT, {"input": edge}))["upsert_edge"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def edge_list(
        self,
        ctx: Context[Any, Any],
        from_id: Annotated[str | None, described(query_arg("edges", "fromId"))] = None,
        to_id: Annotated[str | None, described(query_arg("edges", "toId"))] = None,
        type: Annotated[str | None, described(query_arg("edges", "type"))] = None,
        namespace: Annotated[str | None, described(query_arg("edges", "namespace"))] = None,
        as_of: Annotated[datetime | None, described(query_arg("edges", "asOf"))] = None,
        include_expired: Annotated[bool, described(query_arg("edges", "includeExpired"))] = False,
        first: Annotated[int, described(query_arg("edges", "first") + PAGE_NOTE)] = TOOL_PAGE,
        after: Annotated[str | None, described(query_arg("edges", "after"))] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            variables = {
                "fromId": from_id,
                "toId": to_id,
                "type": type,
                "namespace": namespace,
                "asOf": _stamp(as_of),
                "includeExpired": include_expired,
                "first": first,
                "after": after,
            }
            return (await run(session, doc.EDGE_LIST, variables))["edges"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def related(
        self,
        ctx: Context[Any, Any],
        id: Annotated[str, described(query_arg("related", "id"))],
        namespace: Annotated[str | None, described(query_arg("related", "namespace"))] = None,
        as_of: Annotated[datetime | None, described(query_arg("related", "asOf"))] = None,
        include_expired: Annotated[bool, described(query_arg("related", "includeExpired"))] = False,
        first: Annotated[
            int,
            described(
                "Edges per list (outgoing, incoming): "
                + d.argument("Related", "outgoing", "first")
                + PAGE_NOTE
            ),
        ] = TOOL_PAGE,
        outgoing_after: Annotated[
            str | None, described("outgoing: " + d.argument("Related", "outgoing", "after"))
        ] = None,
        incoming_after: Annotated[
            str | None, described("incoming: " + d.argument("Related", "incoming", "after"))
        ] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            variables = {
                "id": id,
                "namespace": namespace,
                "asOf": _stamp(as_of),
                "includeExpired": include_expired,
                "first": first,
                "outgoingAfter": outgoing_after,
                "incomingAfter": incoming_after,
            }
            found: dict[str, Any] = (await run(session, doc.RELATED, variables))["related"]
            return found

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def conflict_resolve(
        self,
        ctx: Context[Any, Any],
        edge_id: Annotated[str, described(mutation_arg("resolveConflict", "edgeId"))],
        resolution: Annotated[
            Literal["accepted_dual", "superseded", "refuted", "merged"],
            described(mutation_arg("resolveConflict", "resolution")),
        ],
        resolver: Annotated[str, described(mutation_arg("resolveConflict", "resolver"))],
        winner_id: Annotated[
            str | None, described(mutation_arg("resolveConflict", "winnerId"))
        ] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            variables = {
                "edgeId": edge_id,
                "resolution": resolution.upper(),
                "resolver": resolver,
                "winnerId": winner_id,
            }
            return (await run(session, doc.CONFLICT_RESOLVE, variables))["resolve_conflict"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def conflicts(
        self,
        ctx: Context[Any, Any],
        status: Annotated[
            Literal["unresolved", "resolved", "all"], described(query_arg("conflicts", "status"))
        ] = "unresolved",
        lanes: Annotated[list[str] | None, described(query_arg("conflicts", "lanes"))] = None,
        first: Annotated[int, described(query_arg("conflicts", "first") + PAGE_NOTE)] = TOOL_PAGE,
        after: Annotated[str | None, described(query_arg("conflicts", "after"))] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            variables = {"status": status.upper(), "lanes": lanes, "first": first, "after": after}
            return (await run(session, doc.CONFLICTS, variables))["conflicts"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def ego(
        self,
        ctx: Context[Any, Any],
        nodes: Annotated[list[str], described(query_arg("ego", "nodes"))],
        hops: Annotated[int, described(query_arg("ego", "hops"))] = 1,
        direction: Annotated[
            Literal["out", "in", "both"], described(query_arg("ego", "direction"))
        ] = "both",
        types: Annotated[list[str] | None, described(query_arg("ego", "types"))] = None,
        limit: Annotated[int, described(query_arg("ego", "limit") + PAGE_NOTE)] = TOOL_PAGE,
        as_of: Annotated[datetime | None, described(query_arg("ego", "asOf"))] = None,
        include_expired: Annotated[bool, described(query_arg("ego", "includeExpired"))] = False,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            variables = {
                "nodes": nodes,
                "hops": hops,
                "direction": direction.upper(),
                "types": types,
                "limit": limit,
                "asOf": _stamp(as_of),
                "includeExpired": include_expired,
            }
            return (await run(session, doc.EGO, variables))["ego"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def retire(
        self,
        ctx: Context[Any, Any],
        id: Annotated[
            str,
            described(
                "A typed edge (edge_ + 32 hex) or a record. "
                + mutation_arg("retireEdge", "id")
                + " "
                + mutation_arg("retireRecord", "id")
            ),
        ],
        invalid_at: Annotated[
            datetime | None, described("edge: " + mutation_arg("retireEdge", "invalidAt"))
        ] = None,
        reason: Annotated[
            str | None, described("record: " + mutation_arg("retireRecord", "reason"))
        ] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            if id.startswith("edge_"):
                variables = {"id": id, "invalidAt": _stamp(invalid_at)}
                return (await run(session, doc.RETIRE_EDGE, variables))["retire_edge"]
            if invalid_at is not None:
                raise bad_input("invalid_at is for retiring a typed edge (edge_ + 32 hex)")
            variables = {"id": id, "reason": reason}
            return (await run(session, doc.RETIRE_RECORD, variables))["retire_record"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]


EDGE_TOOLS = {
    "edge_upsert": d.field("Mutation", "upsertEdge")
    + " "
    + d.type_("EdgeInput")
    + " Returns the edge with its id (edge_ + 32 hex) and version.",
    "edge_list": d.field("Query", "edges") + " Returns a page of edges.",
    "related": d.field("Query", "related")
    + " Returns {record_id, outgoing, incoming}, each a page of edges with the other end.",
    "conflict_resolve": d.field("Mutation", "resolveConflict")
    + " Returns the edge with its conflict_state, resolution and resolver.",
    "conflicts": d.field("Query", "conflicts")
    + " Returns a page of contradicts edges with both records.",
    "ego": d.field("Query", "ego")
    + " Returns {edges, hops, neighbors, not_shown}: bounded by limit, never a silent cut.",
    "retire": "Retire a typed edge (edge_ id) or a record (sr_ id), never deleting it. edge: "
    + d.field("Mutation", "retireEdge")
    + " record: "
    + d.field("Mutation", "retireRecord")
    + " Returns the edge, or the record's id, lane, source_type, version and properties.",
}
