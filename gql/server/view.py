"""The GraphQL view: strawberry's ASGI view with our context, authorisation, limits,
compiled path and offline GraphiQL."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError, MissingQueryError
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.subscriptions import GRAPHQL_SSE_PROTOCOL, GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from gql.api.auth import authorize, socket_authorization
from gql.api.context import Context
from gql.api.cost import DEFAULT_MAX_COST, query_cost
from gql.api.errors import refusal_response
from gql.api.limits import DEFAULT_MAX_FIELDS, RequestLimitError, check_variables
from gql.api.observe import note_route
from gql.api.schema import LIMIT_RULES, MAX_TOKENS, build_schema, schema
from gql.api.session import Caller, Services, Session
from gql.api.stopped import CODE as STOPPED
from gql.api.stopped import stopped_details, stopped_message
from gql.server import lsn, over_http
from gql.server.client_watch import ClientWatch
from gql.server.compiled_endpoint import CompiledPath
from gql.server.graphiql import graphiql_html
from gql.server.headers import GRAPHIQL_HEADERS
from gql.server.settings import Settings
from gql.server.sockets import is_event_stream
from gql.server.websocket import TransportWSHandler
from store.errors import NoPolicyError
from store.kinds.policy import in_force as policy_store
from store.ledger.executor import COMPLETED_WRITES
from store.reads.replicas import Freshness

SUBSCRIPTION_OVER_HTTP = (
    "subscriptions are served over WebSocket, at this same path with the protocol "
    "graphql-transport-ws (send the token in the connection_init payload), or as "
    "server-sent events: POST it with the header Accept: text/event-stream; otherwise "
    "send queries and mutations only"
)


class GraphQLView(GraphQL[Context, None]):
    """Strawberry's ASGI view with our context, auth, limits and offline GraphiQL."""

    graphql_transport_ws_handler_class = TransportWSHandler

    def __init__(self, settings: Settings) -> None:
        served = (
            schema
            if (settings.max_query_cost, settings.max_fields)
            == (DEFAULT_MAX_COST, DEFAULT_MAX_FIELDS)
            else build_schema(settings.max_query_cost, settings.max_fields)
        )
        super().__init__(
            served,
            # Over WebSocket graphql-transport-ws only (a client offering nothing else is
            # closed with 4406); over HTTP, GraphQL over SSE in its "distinct connections"
            # mode: one POST with `Accept: text/event-stream` per subscription.
            subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_SSE_PROTOCOL],
            keep_alive=True,
            keep_alive_interval=15,
            connection_init_wait_timeout=timedelta(seconds=settings.ws_init_timeout),
        )
        self.settings = settings
        # What it covers is answered before strawberry runs (gql.api.compiled).
        self.compiled = (
            CompiledPath(
                served._schema,
                served.config.name_converter,
                LIMIT_RULES,
                MAX_TOKENS,
                settings.max_fields,
                settings.anonymous_agent,
                # Over its cost limit an operation goes the ordinary way, which refuses it.
                checks=[
                    lambda s, document, name, variables: (
                        query_cost(s, document, name, variables) <= settings.max_query_cost
                    )
                ],
            )
            if settings.compiled_path
            else None
        )

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        services: Services = request.state.services
        if isinstance(request, WebSocket):
            # Authorised from the connection_init payload in on_ws_connect. A socket's
            # operations follow the live feed, which follows the primary: they read there.
            caller = Caller(agent=None, problem="connection not initialised")
            return Context(Session(services, caller, freshness=Freshness(primary=True)))
        # Set by __call__ from the headers, before the body was read.
        session: Session | None = getattr(request.state, "session", None)
        if session is None:
            caller = await authorize(
                request.headers.get("authorization"), services, self.settings.anonymous_agent
            )
            session = lsn.http_session(services, caller, request)
        if is_event_stream(request.scope):
            # A subscription streamed over HTTP (SSE) follows the live feed, which follows
            # the primary, as one over a socket does.
            session = Session(services, session.caller, freshness=Freshness(primary=True))
        return Context(session)

    async def on_ws_connect(self, context: Context) -> None:
        caller = await authorize(
            socket_authorization(context.connection_params),
            context.services,
            self.settings.anonymous_agent,
        )
        if caller.agent is None:
            raise ConnectionRejectionError({"message": caller.problem})
        # A socket's operations need a policy: without one it is refused at the start.
        if await policy_store.current(context.services.pool, context.services.policies) is None:
            raise ConnectionRejectionError({"message": NoPolicyError().message})
        context.caller = caller

    async def render_graphql_ide(self, request: Request) -> HTMLResponse:
        return HTMLResponse(graphiql_html(), headers=GRAPHIQL_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        # One Request serves the whole answer: it keeps the parsed headers and the body.
        request = Request(scope, receive)
        if request.method not in ("GET", "HEAD", "POST"):
            refused: Response = refusal_response(405, f"{request.method} is not allowed here")
            refused.headers["allow"] = "GET, POST"
            await refused(scope, receive, send)
            return
        # Who is calling is decided from the headers alone, before the body is read:
        # a caller without a valid token costs the gateway nothing more. It may wait for
        # a connection (the policy's head) like the answer does, so within the same time.
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                refusal = await self._refuse_caller(request)
        except TimeoutError:
            refusal = self.stopped([])
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        left = self.settings.request_timeout - (time.monotonic() - started)
        response = await self._answer_while_connected(request, left)
        if response is not None:
            await response(scope, receive, send)

    async def _refuse_caller(self, request: Request) -> Response | None:
        if request.method == "GET" and self.should_render_graphql_ide(
            self.request_adapter_class(request)
        ):
            return None  # GraphiQL's page needs no token; its requests do
        if getattr(request.state, "session", None) is not None:
            return None  # authorised by the lean path (gql.server.lean), which declined
        services: Services = request.state.services
        caller: Caller | None = getattr(request.state, "caller", None)
        if caller is None:
            caller = await authorize(
                request.headers.get("authorization"), services, self.settings.anonymous_agent
            )
        if caller.agent is None:
            return _unauthenticated(caller.problem or "authentication required", caller.details)
        request.state.session = lsn.http_session(services, caller, request)
        return None

    async def _answer_while_connected(self, request: Request, timeout: float) -> Response | None:
        """The response, unless the client left first (None); past `timeout`, a refusal.

        Leaving or timing out cancels the work: its reads stop at their next await, and
        a write not yet committing rolls back (or leaves the group-commit queue). A write
        whose COMMIT is under way takes the cancellation to wait for its outcome and
        answer it (store.ledger.executor): then the request is answered as it ends.
        """
        try:
            await request.body()  # kept by the request for whoever reads it next
        except ClientDisconnect:
            return None
        response = None
        # The body is read: what the request receives now tells whether the client left.
        watch = ClientWatch(request.receive, max(timeout, 0.0))
        completed: list[str] = []
        noted = COMPLETED_WRITES.set(completed)
        try:
            with watch:
                response = await self._answer(request)
        finally:
            COMPLETED_WRITES.reset(noted)
        if watch.left:
            return None
        if not watch.stopped:
            return response
        return self.stopped(completed)

    def stopped(self, completed: list[str]) -> Response:
        """The answer to a request stopped at its time limit, after `completed` writes."""
        seconds = self.settings.request_timeout
        return refusal_response(
            503,
            stopped_message(seconds, len(completed)),
            STOPPED,
            stopped_details(seconds, len(completed)),
        )

    async def _answer(self, request: Request) -> Response:
        try:
            answer = None if self.compiled is None else await self.compiled.answer(request)
            if answer is None:
                note_route("ordinary")
                answer = await self.run(request)
            response = answer
        except HTTPException as exc:
            # strawberry answers a malformed request in plain text; clients get JSON.
            response = _request_refused(exc.status_code, exc.reason)
            if exc.status_code == 405:
                response.headers["allow"] = "POST"
        except RequestLimitError as exc:
            response = refusal_response(exc.status, exc.message, details=exc.details)
        return over_http.finish(request, lsn.mark(request, response))

    async def execute_single(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: Context,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        # Strawberry allows subscriptions over HTTP for its multipart protocol, which this
        # view does not serve: run as a query, one would fail as an internal error.
        allowed = OperationType.from_http(request_adapter.method) - {OperationType.SUBSCRIPTION}
        try:
            return await self.schema.execute(
                request_data.query,
                root_value=root_value,
                variable_values=request_data.variables,
                context_value=context,
                operation_name=request_data.operation_name,
                allowed_operation_types=allowed,
                operation_extensions=request_data.extensions,
            )
        except CannotGetOperationTypeError as exc:
            raise HTTPException(400, exc.as_http_error_reason()) from exc
        except InvalidOperationTypeError as exc:
            if exc.operation_type is OperationType.SUBSCRIPTION:
                raise RequestLimitError(
                    SUBSCRIPTION_OVER_HTTP, 400, {"protocol": GRAPHQL_TRANSPORT_WS_PROTOCOL}
                ) from exc
            # A mutation over GET: the method is what is wrong (GraphQL over HTTP).
            raise HTTPException(405, exc.as_http_error_reason(request_adapter.method)) from exc
        except MissingQueryError as exc:
            raise HTTPException(400, "No GraphQL query found in the request") from exc

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        over_http.note_result(request, result)
        processed = await super().process_result(request, result)
        return lsn.with_extension(processed, lsn.written(request))  # type: ignore[arg-type,return-value]

    async def parse_http_body(self, request: Any) -> Any:
        data = await super().parse_http_body(request)
        # Decoded JSON, not yet coerced: the cheap place to refuse too many values.
        for item in data if isinstance(data, list) else [data]:
            check_variables(item.variables)
        return data

    def parse_json(self, data: str | bytes) -> Any:
        decoded = super().parse_json(data)
        if not isinstance(decoded, dict | list):
            raise HTTPException(400, "The request body must be a JSON object")
        return decoded

    def decode_json(self, data: str | bytes) -> object:
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            # Bytes that are not UTF-8, or nesting deeper than the decoder goes, are bad
            # JSON too: HTTP answers them 400 and a WebSocket closes with 4400.
            raise json.JSONDecodeError(str(exc), "", 0) from exc


def _unauthenticated(message: str, details: dict[str, object] | None = None) -> Response:
    return refusal_response(
        401, message, "UNAUTHENTICATED", details, headers={"WWW-Authenticate": "Bearer"}
    )


def _request_refused(status: int, reason: str) -> JSONResponse:
    message = reason.rstrip(".")
    if status == 400:
        message += (
            '; send a JSON object such as {"query": "{ labels { label } }", "variables": {}} '
            "with Content-Type: application/json"
        )
    return refusal_response(status, message)
