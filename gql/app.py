"""The Starlette application: GraphQL over HTTP and WebSocket, GraphiQL, health."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.schema.exceptions import InvalidOperationTypeError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types import ExecutionResult

from gql import over_http
from gql.auth import authenticate, socket_authorization
from gql.compiled.endpoint import CompiledReads
from gql.context import Caller, Context, Services
from gql.graphiql import STATIC_PATH, graphiql_html, static_app
from gql.schema import LIMIT_RULES, MAX_TOKENS, schema
from policies.errors import UnknownAgentError
from policies.loader import DEV_POLICY_YAML
from store import policy_store
from store.database import create_engine
from store.errors import NoPolicyError
from store.ledger import Ledger
from store.migrate import migrate
from store.policy_store import PolicyCache
from store.pool import create_pool

log = logging.getLogger("edgeloom")

DEFAULT_MAX_BODY = 8 * 1024 * 1024
DEV_POLICY_ACTOR = "operator:development-default"


@dataclass(frozen=True)
class Settings:
    """How one gateway process runs."""

    database_url: str
    policy_yaml: str | None = None
    policy_source: str = "policy"
    # The agent a request without a token acts as; only ever set for loopback.
    anonymous_agent: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    pool_size: int = 10
    # Connections of the read pool, all opened at start: at least the expected
    # number of concurrent requests, so none waits for a connection to open.
    read_pool_size: int = 20
    # Queries the compiler covers run as one SQL statement building the response;
    # off, every operation runs through strawberry (the differential tests compare).
    compiled_reads: bool = True
    run_migrations: bool = True


class GraphQLView(GraphQL[Context, None]):
    """Strawberry's ASGI view with our context, auth and offline GraphiQL."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(
            schema,
            subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL],
            keep_alive=True,
            keep_alive_interval=15,
        )
        self.settings = settings
        # Queries it covers are answered by one SQL statement before strawberry runs.
        self.compiled = (
            CompiledReads(schema._schema, LIMIT_RULES, MAX_TOKENS, settings.anonymous_agent)
            if settings.compiled_reads
            else None
        )

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        services: Services = request.state.services
        if isinstance(request, WebSocket):
            # Authenticated from the connection_init payload in on_ws_connect.
            return Context(services, Caller(agent=None, problem="connection not initialised"))
        # The compiled path authenticates first; a request it declines is not asked twice.
        caller: Caller | None = getattr(request.state, "caller", None)
        if caller is None:
            caller = await authenticate(
                request.headers.get("authorization"), services, self.settings.anonymous_agent
            )
        return Context(services, caller)

    async def on_ws_connect(self, context: Context) -> None:
        caller = await authenticate(
            socket_authorization(context.connection_params),
            context.services,
            self.settings.anonymous_agent,
        )
        if caller.agent is None:
            raise ConnectionRejectionError({"message": caller.problem})
        # A live token is not enough: its agent must be one the policy in force declares.
        in_force = await policy_store.current(context.services.engine, context.services.policies)
        if in_force is None:
            raise ConnectionRejectionError({"message": NoPolicyError().message})
        if caller.agent not in in_force.policy.agents:
            raise ConnectionRejectionError({"message": UnknownAgentError(caller.agent).message})
        context.caller = caller

    async def render_graphql_ide(self, request: Request) -> HTMLResponse:
        return HTMLResponse(graphiql_html())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        request = Request(scope=scope, receive=receive)
        if request.method not in ("GET", "HEAD", "POST"):
            response: Response = refusal_response(405, f"{request.method} is not allowed here")
            response.headers["allow"] = "GET, POST"
            await response(scope, receive, send)
            return
        try:
            answer = None if self.compiled is None else await self.compiled.answer(request)
            response = answer if answer is not None else await self.run(request)
        except HTTPException as exc:
            # strawberry answers a malformed request in plain text; clients get JSON.
            response = _request_refused(exc.status_code, exc.reason)
            if exc.status_code == 405:
                response.headers["allow"] = "POST"
        await over_http.finish(request, response)(scope, receive, send)

    async def execute_single(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: Context,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        try:
            return await super().execute_single(
                request, request_adapter, sub_response, context, root_value, request_data
            )
        except HTTPException as exc:
            if isinstance(exc.__cause__, InvalidOperationTypeError):
                # A mutation over GET: the method is what is wrong (GraphQL over HTTP).
                raise HTTPException(405, exc.reason) from exc
            raise

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        over_http.note_result(request, result)
        return await super().process_result(request, result)

    def decode_json(self, data: str | bytes) -> object:
        try:
            decoded = json.loads(data)
        except ValueError as exc:  # bad JSON, or bytes that are not UTF-8
            raise HTTPException(400, "Unable to parse request body as JSON") from exc
        if not isinstance(decoded, dict | list):
            raise HTTPException(400, "The request body must be a JSON object")
        return decoded


def _request_refused(status: int, reason: str) -> JSONResponse:
    message = reason.rstrip(".")
    if status == 400:
        message += (
            '; send a JSON object such as {"query": "{ labels { label } }", "variables": {}} '
            "with Content-Type: application/json"
        )
    return refusal_response(status, message)


def refusal_response(status: int, message: str, **details: object) -> JSONResponse:
    """A request refused before GraphQL runs, in the shape of a GraphQL error."""
    extensions = {"code": "BAD_USER_INPUT", **details}
    return JSONResponse(
        {"errors": [{"message": message, "extensions": extensions}]}, status_code=status
    )


class BodySizeLimit:
    """Refuses request bodies over a size before the GraphQL view reads them."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _TooLarge()
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = refusal_response(
            413,
            f"request body is over {self.max_bytes} bytes; "
            "split the work into smaller calls (ingestMany takes up to 1000 records)",
            maxBytes=self.max_bytes,
        )
        await response(scope, receive, send)


class _TooLarge(Exception):
    pass


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


SETTINGS_VARIABLE = "EDGELOOM_SETTINGS"
APP_FACTORY = "gql.app:app_from_environment"


def settings_environment(settings: Settings, workers: int) -> dict[str, str]:
    """The environment a worker process reads its settings from (`app_from_environment`);
    migrations and the policy were applied by the process that starts the workers.

    The workers share the clients, so they share the read pool's size too (each
    keeps a few more than its share, since clients do not spread evenly).
    """
    share = max(4, -(-settings.read_pool_size // workers) + 2)
    prepared = dataclasses.replace(settings, run_migrations=False, read_pool_size=share)
    return {SETTINGS_VARIABLE: json.dumps(dataclasses.asdict(prepared))}


def app_from_environment() -> Starlette:
    """The app of one worker of `edgeloom serve --workers N`."""
    return create_app(Settings(**json.loads(os.environ[SETTINGS_VARIABLE])))


async def prepare(settings: Settings) -> None:
    """Migrate and put the policy in force once, before worker processes start."""
    engine = create_engine(settings.database_url, pool_size=1)
    try:
        if settings.run_migrations:
            await migrate(engine)
        await _ensure_policy(engine, PolicyCache.empty(), settings)
    finally:
        await engine.dispose()


def create_app(settings: Settings) -> Starlette:
    """The gateway as an ASGI app; the lifespan opens the database and the policy."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        engine = create_engine(settings.database_url, pool_size=settings.pool_size)
        try:
            if settings.run_migrations:
                await migrate(engine)
            cache = PolicyCache.empty()
            await _ensure_policy(engine, cache, settings)
            pool = await create_pool(settings.database_url, settings.read_pool_size)
            try:
                yield {
                    "services": Services(
                        engine=engine, ledger=Ledger(engine, cache), policies=cache, pool=pool
                    )
                }
            finally:
                await pool.close()
        finally:
            await engine.dispose()

    view = GraphQLView(settings)
    app = Starlette(
        routes=[
            # Every method reaches the view, which refuses the others as JSON.
            Route("/graphql", view),
            WebSocketRoute("/graphql", view),
            Mount(STATIC_PATH, app=static_app()),
            Route("/healthz", health),
        ],
        lifespan=lifespan,
    )
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    return app


async def _ensure_policy(engine: Any, cache: PolicyCache, settings: Settings) -> None:
    if settings.policy_yaml is not None:
        before = await policy_store.current(engine, cache)
        if before is not None and before.yaml != settings.policy_yaml:
            log.warning(
                "policy file %s replaces version %s (applied by %s at %s)",
                settings.policy_source,
                before.version,
                before.applied_by,
                before.applied_at.isoformat(),
            )
        applied = await policy_store.apply(
            engine,
            cache,
            settings.policy_yaml,
            applied_by="operator",
            source=settings.policy_source,
        )
        log.info("policy version %s in force (%s)", applied.version, settings.policy_source)
        return
    current = await policy_store.current(engine, cache)
    if current is None and settings.anonymous_agent is not None:
        applied = await policy_store.apply(
            engine, cache, DEV_POLICY_YAML, applied_by=DEV_POLICY_ACTOR, source="development policy"
        )
        log.info("development policy version %s in force", applied.version)
