"""The MCP tools, each a thin adapter: arguments in snake_case become the variables of a
fixed GraphQL document (gql.mcp.documents) run as the caller (gql.mcp.run). Every tool's
and argument's description is read from the GraphQL schema (gql.mcp.describe)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from gql.api.session import Session
from gql.api.stopped import CODE as STOPPED
from gql.api.stopped import stopped_details, stopped_message
from gql.mcp import describe as d
from gql.mcp import documents as doc
from gql.mcp.feed import settled
from gql.mcp.run import REFUSALS, Refused, answer, bad_input, refused, run
from gql.mcp.shapes import compact_hit, ingest_input, item_schema, needs, not_found, page_of
from store.errors import NotFoundError
from store.ledger.executor import COMPLETED_WRITES

TOOL_PAGE = 20
"""A tool's page size unless it asks for another: small enough for a model's context."""
PAGE_NOTE = f" Here the default is {TOOL_PAGE}."
PAGE_SHAPE = (
    "Lists come back as pages: {items, total_count, page_info: {has_next_page, end_cursor}}; "
    "pass end_cursor back as after for the next page."
)


class Gate(Protocol):
    """How a transport turns a tool call into the caller's session (gql.api.auth decides),
    and how long a call may run (a GraphQL request's time, `Settings.request_timeout`)."""

    time_limit: float

    async def session(self, ctx: Context[Any, Any]) -> Session: ...


def described(text: str, **kw: Any) -> Any:
    return Field(description=text, **kw)


def query_arg(field: str, arg: str) -> str:
    return d.argument("Query", field, arg)


def mutation_arg(field: str, arg: str) -> str:
    return d.argument("Mutation", field, arg)


def _ingest(name: str) -> str:
    return d.field("IngestInput", name)


class Tools:
    """The tools of one server; `gate` gives each call its caller's session."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    async def _call(self, ctx: Context[Any, Any], work: Callable[[Session], Awaitable[Any]]) -> Any:
        seconds = self.gate.time_limit
        completed: list[str] = []
        noted = COMPLETED_WRITES.set(completed)
        try:
            # Stopped past it as a GraphQL request is: what was not yet committing is
            # rolled back, and a write whose commit is under way answers its outcome.
            async with asyncio.timeout(seconds):
                session = await self.gate.session(ctx)
                return answer(await work(session))
        except Refused as refusal:
            return refusal.result()
        except REFUSALS as exc:
            return refused(exc).result()
        except TimeoutError:
            done = len(completed)
            message = stopped_message(seconds, done)
            return Refused(message, STOPPED, stopped_details(seconds, done)).result()
        finally:
            COMPLETED_WRITES.reset(noted)

    async def e_ingest(
        self,
        ctx: Context[Any, Any],
        content: Annotated[str | None, described(_ingest("content"))] = None,
        properties: Annotated[list[str] | None, described(_ingest("properties"))] = None,
        source_type: Annotated[str | None, described(_ingest("sourceType"))] = None,
        assign_lane: Annotated[str | None, described(_ingest("lane"))] = None,
        adjusts: Annotated[list[str] | None, described(_ingest("adjusts"))] = None,
        idempotency_key: Annotated[str | None, described(_ingest("idempotencyKey"))] = None,
        embedding: Annotated[list[float] | None, described(_ingest("embedding"))] = None,
        expires_at: Annotated[datetime | None, described(_ingest("expiresAt"))] = None,
        expire_now: Annotated[bool | None, described(_ingest("expireNow"))] = None,
        records: Annotated[
            list[dict[str, Any]] | None,
            described(
                "Many records at once, each with the fields above (content required): "
                + d.field("Mutation", "ingestMany")
                + " "
                + mutation_arg("ingestMany", "inputs"),
                json_schema_extra={"items": item_schema()},
            ),
        ] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            if records is not None:
                if content is not None:
                    raise bad_input("pass either content (one record) or records (many), not both")
                inputs = [ingest_input(r) for r in records]
                data = await run(session, doc.INGEST_MANY, {"inputs": inputs})
                return {"records": data["ingest_many"]}
            needs("ingest", "e_ingest", content=content)
            one = {
                "content": content,
                "properties": properties,
                "source_type": source_type,
                "assign_lane": assign_lane,
                "adjusts": adjusts,
                "idempotency_key": idempotency_key,
                "embedding": embedding,
                "expires_at": None if expires_at is None else expires_at.isoformat(),
                "expire_now": expire_now,
            }
            data = await run(session, doc.INGEST, {"input": ingest_input(one)})
            return data["ingest"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def e_gather(
        self,
        ctx: Context[Any, Any],
        action: Annotated[
            Literal["intersect", "union", "timeline", "traverse"],
            described(
                "intersect, union, timeline: "
                + d.field("Query", "gather")
                + " traverse: "
                + d.field("Query", "traverse")
            ),
        ],
        match: Annotated[
            list[str] | None,
            described("intersect, union, timeline: " + query_arg("gather", "match")),
        ] = None,
        lanes: Annotated[list[str] | None, described(query_arg("gather", "lanes"))] = None,
        as_of: Annotated[datetime | None, described(query_arg("gather", "asOf"))] = None,
        first: Annotated[int, described(query_arg("gather", "first") + PAGE_NOTE)] = TOOL_PAGE,
        after: Annotated[str | None, described(query_arg("gather", "after"))] = None,
        from_id: Annotated[
            str | None, described("traverse: " + query_arg("traverse", "from"))
        ] = None,
        depth: Annotated[int, described("traverse: " + query_arg("traverse", "depth"))] = 1,
        labels: Annotated[
            list[str] | None, described("traverse: " + query_arg("traverse", "labels"))
        ] = None,
        limit: Annotated[
            int, described("traverse: " + query_arg("traverse", "limit") + PAGE_NOTE)
        ] = TOOL_PAGE,
        edge_types: Annotated[
            list[str] | None, described("traverse: " + query_arg("traverse", "edgeTypes"))
        ] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            stamp = None if as_of is None else as_of.isoformat()
            if action == "traverse":
                needs(action, "e_gather", from_id=from_id)
                variables = {
                    "from": from_id,
                    "depth": depth,
                    "labels": labels,
                    "asOf": stamp,
                    "limit": limit,
                    "edgeTypes": edge_types,
                }
                return (await run(session, doc.TRAVERSE, variables))["traverse"]
            needs(action, "e_gather", match=match)
            variables = {
                "match": match,
                "mode": action.upper(),
                "lanes": lanes,
                "asOf": stamp,
                "first": first,
                "after": after,
            }
            return (await run(session, doc.GATHER, variables))["gather"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def e_search(
        self,
        ctx: Context[Any, Any],
        text: Annotated[str | None, described(query_arg("search", "text"))] = None,
        vector: Annotated[list[float] | None, described(query_arg("search", "vector"))] = None,
        match: Annotated[list[str] | None, described(query_arg("search", "match"))] = None,
        mode: Annotated[
            Literal["intersect", "union"], described(query_arg("search", "mode"))
        ] = "intersect",
        lanes: Annotated[list[str] | None, described(query_arg("search", "lanes"))] = None,
        as_of: Annotated[datetime | None, described(query_arg("search", "asOf"))] = None,
        first: Annotated[int, described(query_arg("search", "first") + PAGE_NOTE)] = TOOL_PAGE,
        after: Annotated[str | None, described(query_arg("search", "after"))] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            variables = {
                "text": text,
                "vector": vector,
                "match": match,
                "mode": mode.upper(),
                "lanes": lanes,
                "asOf": None if as_of is None else as_of.isoformat(),
                "first": first,
                "after": after,
            }
            found = (await run(session, doc.SEARCH, variables))["search"]
            found["items"] = [compact_hit(hit) for hit in found["items"]]
            return found

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def e_read(
        self,
        ctx: Context[Any, Any],
        id: Annotated[str, described(query_arg("record", "id"))],
        as_of: Annotated[datetime | None, described(query_arg("record", "asOf"))] = None,
        versions: Annotated[
            bool,
            described(
                "true: also a page of its versions, oldest first ("
                + d.field("Record", "versions")
                + "), each with "
                + "number, at, event, actor, content, properties, policy_version and hash."
            ),
        ] = False,
        first: Annotated[
            int, described("versions: " + query_arg("gather", "first") + PAGE_NOTE)
        ] = TOOL_PAGE,
        after: Annotated[str | None, described("versions: " + query_arg("gather", "after"))] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            stamp = None if as_of is None else as_of.isoformat()
            document = doc.READ_VERSIONS if versions else doc.READ
            record = (await run(session, document, {"id": id, "asOf": stamp}))["record"]
            if record is None:
                raise not_found(id)
            if versions:
                record["versions"] = page_of(record["versions"], first, after)
            return record

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def e_update(
        self,
        ctx: Context[Any, Any],
        id: Annotated[str, described(mutation_arg("update", "id"))],
        content: Annotated[str | None, described(mutation_arg("update", "content"))] = None,
        properties: Annotated[
            list[str] | None, described(mutation_arg("update", "properties"))
        ] = None,
        expected_version: Annotated[
            int | None, described(mutation_arg("update", "expectedVersion"))
        ] = None,
        expires_at: Annotated[
            datetime | None, described(mutation_arg("update", "expiresAt"))
        ] = None,
        expire_now: Annotated[bool | None, described(mutation_arg("update", "expireNow"))] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            variables = {
                "id": id,
                "content": content,
                "properties": properties,
                "expectedVersion": expected_version,
                "expiresAt": None if expires_at is None else expires_at.isoformat(),
                "expireNow": expire_now,
            }
            return (await run(session, doc.UPDATE, variables))["update"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def e_property(
        self,
        ctx: Context[Any, Any],
        action: Annotated[
            Literal["list", "values", "add", "remove", "connect", "disconnect", "group", "ungroup"],
            described(
                "list: "
                + d.field("Query", "labels")
                + " values: "
                + d.field("Query", "values")
                + " add: "
                + d.field("Mutation", "addProperties")
                + " remove: "
                + d.field("Mutation", "removeProperties")
                + " connect: "
                + d.field("Mutation", "connect")
                + " disconnect: "
                + d.field("Mutation", "disconnect")
                + " group: "
                + d.field("Mutation", "group")
                + " ungroup: "
                + d.field("Mutation", "ungroup")
            ),
        ],
        id: Annotated[
            str | None,
            described(
                "add, remove: the record. "
                + mutation_arg("addProperties", "id")
                + " disconnect: "
                + mutation_arg("disconnect", "id")
                + " ungroup: "
                + mutation_arg("ungroup", "id")
            ),
        ] = None,
        properties: Annotated[
            list[str] | None,
            described(
                "add: "
                + mutation_arg("addProperties", "properties")
                + " remove: "
                + mutation_arg("removeProperties", "properties")
            ),
        ] = None,
        labels: Annotated[
            list[str] | None, described("remove: " + mutation_arg("removeProperties", "labels"))
        ] = None,
        lane: Annotated[
            str | None, described("list, values: " + query_arg("labels", "lane"))
        ] = None,
        label: Annotated[str | None, described("values: " + query_arg("values", "label"))] = None,
        prefix: Annotated[str | None, described("values: " + query_arg("values", "prefix"))] = None,
        similar_to: Annotated[
            str | None, described("values: " + query_arg("values", "similarTo"))
        ] = None,
        a: Annotated[str | None, described("connect: " + mutation_arg("connect", "a"))] = None,
        b: Annotated[str | None, described("connect: " + mutation_arg("connect", "b"))] = None,
        hint: Annotated[
            str | None, described("connect, group: " + mutation_arg("connect", "hint"))
        ] = None,
        record_ids: Annotated[
            list[str] | None,
            described(
                "group: "
                + mutation_arg("group", "recordIds")
                + " ungroup: "
                + mutation_arg("ungroup", "recordIds")
            ),
        ] = None,
        first: Annotated[
            int, described("list: " + query_arg("gather", "first") + PAGE_NOTE)
        ] = TOOL_PAGE,
        after: Annotated[str | None, described("list: " + query_arg("gather", "after"))] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            variables: dict[str, Any]
            if action == "list":
                found = (await run(session, doc.LABELS, {"lane": lane}))["labels"]
                return page_of(found, first, after)
            if action == "values":
                needs(action, "e_property", label=label)
                variables = {
                    "label": label,
                    "lane": lane,
                    "prefix": prefix,
                    "similarTo": similar_to,
                    "first": first,
                    "after": after,
                }
                return (await run(session, doc.VALUES, variables))["values"]
            if action == "add":
                needs(action, "e_property", id=id, properties=properties)
                variables = {"id": id, "properties": properties}
                return (await run(session, doc.ADD, variables))["add_properties"]
            if action == "remove":
                needs(action, "e_property", id=id)
                variables = {"id": id, "labels": labels, "properties": properties}
                return (await run(session, doc.REMOVE, variables))["remove_properties"]
            if action == "connect":
                needs(action, "e_property", a=a, b=b, hint=hint)
                return (await run(session, doc.CONNECT, {"a": a, "b": b, "hint": hint}))["connect"]
            if action == "disconnect":
                needs(action, "e_property", id=id)
                return (await run(session, doc.DISCONNECT, {"id": id}))["disconnect"]
            if action == "group":
                needs(action, "e_property", record_ids=record_ids, hint=hint)
                variables = {"recordIds": record_ids, "hint": hint}
                return (await run(session, doc.GROUP, variables))["group"]
            needs(action, "e_property", id=id)
            variables = {"id": id, "recordIds": record_ids}
            return (await run(session, doc.UNGROUP, variables))["ungroup"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def e_audit(
        self,
        ctx: Context[Any, Any],
        action: Annotated[
            Literal["list", "inspect", "feed"],
            described(
                "list: "
                + d.field("Query", "audit")
                + " inspect: "
                + d.field("Query", "auditEvent")
                + " feed: the events after a cursor, every record's, for a client without "
                'a WebSocket to poll: pass the last cursor you received as after ("0" from '
                "the start); each event comes once, in feed order, with the same rights as "
                "the auditEvents subscription."
            ),
        ],
        record_id: Annotated[
            str | None, described("list: " + query_arg("audit", "recordId"))
        ] = None,
        kinds: Annotated[
            list[str] | None, described("list, feed: " + query_arg("audit", "kinds"))
        ] = None,
        id: Annotated[str | None, described("inspect: " + query_arg("auditEvent", "id"))] = None,
        first: Annotated[int, described(query_arg("audit", "first") + PAGE_NOTE)] = TOOL_PAGE,
        after: Annotated[
            str | None, described("list, feed: " + query_arg("audit", "after"))
        ] = None,
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            if action == "inspect":
                needs(action, "e_audit", id=id)
                event = (await run(session, doc.AUDIT_EVENT, {"id": id}))["audit_event"]
                if event is None:
                    raise refused(NotFoundError("audit event", id or ""))
                return event
            if action == "feed":
                return await settled(session, kinds, first, after or "0")
            variables = {"recordId": record_id, "kinds": kinds, "first": first, "after": after}
            return (await run(session, doc.AUDIT, variables))["audit"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]

    async def e_system(
        self,
        ctx: Context[Any, Any],
        action: Annotated[
            Literal["get_profile"], described("get_profile: " + d.field("Query", "profile"))
        ] = "get_profile",
    ) -> CallToolResult:
        async def work(session: Session) -> Any:
            return (await run(session, doc.PROFILE, {}))["profile"]

        return await self._call(ctx, work)  # type: ignore[no-any-return]
