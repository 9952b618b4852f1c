"""The Starlette application: GraphQL over HTTP and WebSocket, GraphiQL, health."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import logging
import os
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.schema.exceptions import InvalidOperationTypeError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types import ExecutionResult

from gql import over_http
from gql.auth import authorize, socket_authorization
from gql.compiled.endpoint import CompiledPath
from gql.context import Context
from gql.cost import DEFAULT_MAX_COST, query_cost
from gql.dashboard import dashboard_routes
from gql.errors import refusal_response
from gql.feed_hub import FeedHub, FeedOptions
from gql.graphiql import STATIC_PATH, graphiql_html, static_app
from gql.headers import GRAPHIQL_HEADERS, SecurityHeaders
from gql.limits import (
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_FIELDS,
    BodySizeLimit,
    RequestLimitError,
    check_variables,
)
from gql.loopback import loopback_problem
from gql.schema import LIMIT_RULES, MAX_TOKENS, build_schema, schema
from gql.session import Caller, Services, Session
from gql.sockets import SocketCaps, SocketLimits, fitted, open_files_limit
from gql.websocket import TransportWSHandler
from policies.loader import DEV_POLICY_YAML
from store import checkpoints, policy_store
from store.database import create_engine
from store.errors import NoPolicyError
from store.executor import COMPLETED_WRITES, Executor
from store.group_commit import DEFAULT_OUTCOME_TIMEOUT
from store.migrate import migrate
from store.policy_commands import ApplyPolicy
from store.policy_store import PolicyCache, PolicyVersion
from store.pool import Pool, create_pool
from store.queries import DEFAULT_MAX_RESPONSE_BYTES
from store.roles import serving_url
from store.signing import Signer

log = logging.getLogger("edgeloom")

# A request stopped midway (its client left, or its time ran out) leaves graphql-core
# and strawberry with resolver coroutines made but never started; Python warns about
# each as it is freed. They are expected there, and only there.
ABANDONED_RESOLVERS = r"coroutine '(Executor|GraphQLCoreConverter)\..*' was never awaited"
warnings.filterwarnings("ignore", ABANDONED_RESOLVERS, RuntimeWarning)

DEFAULT_REQUEST_TIMEOUT = 30.0
DEV_POLICY_ACTOR = "operator:development-default"


@dataclass(frozen=True)
class Settings:
    """How one gateway process runs."""

    database_url: str
    policy_yaml: str | None = None
    policy_source: str = "policy"
    # The agent a request without a token acts as; only ever set for loopback.
    anonymous_agent: str | None = None
    # Also the largest WebSocket message.
    max_body_bytes: int = DEFAULT_MAX_BODY
    # The most objects one operation may ask for (see gql.cost).
    max_query_cost: int = DEFAULT_MAX_COST
    # The most field selections one document may hold, counted before it is validated.
    max_fields: int = DEFAULT_MAX_FIELDS
    # The most bytes one response may hold (of record content read, on the ordinary
    # path; of JSON built, on the compiled path): over it, refused before it is read.
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    # An HTTP request still running after this many seconds is stopped and answered.
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    # A write whose COMMIT was under way when its request stopped is waited for this many
    # more seconds, then answered with its result, or OUTCOME_UNKNOWN (store.executor).
    write_outcome_timeout: float = DEFAULT_OUTCOME_TIMEOUT
    # WebSocket connections one process holds at once (lowered at start when the
    # open-file limit leaves room for fewer), and of those, how many may still be
    # waiting for their connection_init to be acknowledged, in all and from one client
    # address. The defaults hold ten thousand subscribers from one address (a proxy).
    max_ws_connections: int = 16_384
    max_ws_unauthenticated: int = 1024
    max_ws_unauthenticated_per_address: int = 256
    # A WebSocket that has not sent connection_init after this many seconds is closed (4408).
    ws_init_timeout: float = 10.0
    # Connections of the SQLAlchemy engine (tokens, the feed's catch-up reads).
    pool_size: int = 10
    # Connections of the pool every read and write runs on, all opened at start: at
    # least the expected number of concurrent requests, so none waits for one to open.
    read_pool_size: int = 20
    # Queries the compiler covers run as one SQL statement building the response, and
    # `ingest`/`ingestMany` answer their records directly (gql.compiled); off, every
    # operation runs through strawberry (the differential tests compare).
    compiled_path: bool = True
    run_migrations: bool = True
    # The role the gateway serves as; derived from database_url when None (see store.roles).
    runtime_database_url: str | None = None
    # How often a checkpoint anchors the ledger (0: never; `edgeloom checkpoint` on demand),
    # and the key file that signs them (None: unsigned).
    checkpoint_seconds: float = 60.0
    checkpoint_key: Path | None = None
    # Sign with the key in checkpoint_key although this memory's newest checkpoints were
    # signed by another (or it is missing): without it such a start is refused.
    new_checkpoint_key: bool = False
    feed: FeedOptions = FeedOptions()


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
            # graphql-transport-ws only: a client offering nothing else is closed with 4406.
            subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL],
            keep_alive=True,
            keep_alive_interval=15,
            connection_init_wait_timeout=timedelta(seconds=settings.ws_init_timeout),
        )
        self.settings = settings
        # What it covers is answered before strawberry runs (gql.compiled).
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
            # Authorised from the connection_init payload in on_ws_connect.
            caller = Caller(agent=None, problem="connection not initialised")
            return Context(Session(services, caller))
        # Set by __call__ from the headers, before the body was read.
        session: Session | None = getattr(request.state, "session", None)
        if session is None:
            caller = await authorize(
                request.headers.get("authorization"), services, self.settings.anonymous_agent
            )
            session = Session(services, caller)
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
        # a caller without a valid token costs the gateway nothing more.
        refusal = await self._refuse_caller(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        response = await self._answer_while_connected(request)
        if response is not None:
            await response(scope, receive, send)

    async def _refuse_caller(self, request: Request) -> Response | None:
        if request.method == "GET" and self.should_render_graphql_ide(
            self.request_adapter_class(request)
        ):
            return None  # GraphiQL's page needs no token; its requests do
        services: Services = request.state.services
        caller = await authorize(
            request.headers.get("authorization"), services, self.settings.anonymous_agent
        )
        if caller.agent is None:
            return _unauthenticated(caller.problem or "authentication required", caller.details)
        request.state.session = Session(services, caller)
        return None

    async def _answer_while_connected(self, request: Request) -> Response | None:
        """The response, unless the client left first (None); past the timeout, a refusal.

        Leaving or timing out cancels the work: its reads stop at their next await, and
        a write not yet committing rolls back (or leaves the group-commit queue). A write
        whose COMMIT is under way takes the cancellation to wait for its outcome and
        answer it (store.executor): then the request is answered as it ends.
        """
        try:
            await request.body()  # kept by the request for whoever reads it next
        except ClientDisconnect:
            return None
        response = None
        # The body is read: what the request receives now tells whether the client left.
        watch = _ClientWatch(request.receive, self.settings.request_timeout)
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
        seconds = self.settings.request_timeout
        if completed:
            written = (
                f"; {len(completed)} of its writes had been made before it stopped (their "
                "results are not in this answer: read them back) and nothing after them was"
            )
        else:
            written = "; nothing it asked to write was written"
        return refusal_response(
            503,
            f"the request was stopped after {seconds:g} seconds, the most one request may run; "
            f"ask for less (a smaller first:, fewer nested lists) or split the work{written}",
            details={"timeoutSeconds": seconds, "completedWrites": len(completed)},
        )

    async def _answer(self, request: Request) -> Response:
        try:
            answer = None if self.compiled is None else await self.compiled.answer(request)
            response = answer if answer is not None else await self.run(request)
        except HTTPException as exc:
            # strawberry answers a malformed request in plain text; clients get JSON.
            response = _request_refused(exc.status_code, exc.reason)
            if exc.status_code == 405:
                response.headers["allow"] = "POST"
        except RequestLimitError as exc:
            response = refusal_response(exc.status, exc.message, details=exc.details)
        return over_http.finish(request, response)

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


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


# Most answers take a few milliseconds: watching for the client to leave, and the
# request's deadline, start only after this long, so that a quick answer costs one
# timer and no second task.
WATCH_AFTER_SECONDS = 0.05


class _ClientWatch:
    """Cancels the request's own task when its client leaves (`left`) or its time is up
    (`expired`); that cancellation ends at this block, which it `stopped` unless the work
    took it to answer a write's outcome. Both start after WATCH_AFTER_SECONDS, from one
    timer."""

    def __init__(self, receive: Receive, timeout: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._receive = receive
        self._first = min(WATCH_AFTER_SECONDS, timeout)
        self._rest = timeout - self._first
        self._watcher: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.left = False
        self.expired = False
        self.stopped = False

    def __enter__(self) -> _ClientWatch:
        self._timer = asyncio.get_running_loop().call_later(self._first, self._watch)
        return self

    def _watch(self) -> None:
        self._watcher = asyncio.ensure_future(_disconnected(self._receive))
        self._watcher.add_done_callback(self._gone)
        self._timer = asyncio.get_running_loop().call_later(self._rest, self._expire)

    def _gone(self, watcher: asyncio.Future[None]) -> None:
        if not watcher.cancelled() and watcher.exception() is None and not self.expired:
            self.left = True
            self._task.cancel()

    def _expire(self) -> None:
        if not self.left:
            self.expired = True
            self._task.cancel()

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        assert self._timer is not None
        self._timer.cancel()
        if self._watcher is not None:
            self._watcher.remove_done_callback(self._gone)
            self._watcher.cancel()
        if not (self.left or self.expired):
            return False
        self._task.uncancel()  # our own cancellation: it ends here
        self.stopped = kind is asyncio.CancelledError
        return self.stopped


def _request_refused(status: int, reason: str) -> JSONResponse:
    message = reason.rstrip(".")
    if status == 400:
        message += (
            '; send a JSON object such as {"query": "{ labels { label } }", "variables": {}} '
            "with Content-Type: application/json"
        )
    return refusal_response(status, message)


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
    return {SETTINGS_VARIABLE: json.dumps(dataclasses.asdict(prepared), default=str)}


def app_from_environment() -> GatewayApp:
    """The app of one worker of `edgeloom serve --workers N`."""
    fields = json.loads(os.environ[SETTINGS_VARIABLE])
    fields["feed"] = FeedOptions(**fields["feed"])
    if fields["checkpoint_key"] is not None:
        fields["checkpoint_key"] = Path(fields["checkpoint_key"])
    return create_app(Settings(**fields))


def create_app(settings: Settings) -> GatewayApp:
    """The gateway as an ASGI app; the lifespan opens the database and the policy."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        if settings.run_migrations:
            owner = create_engine(settings.database_url, pool_size=1)
            try:
                await migrate(owner)
            finally:
                await owner.dispose()
        url = await serving_url(settings.database_url, settings.runtime_database_url)
        engine = create_engine(url, pool_size=settings.pool_size)
        pool = await create_pool(url, settings.read_pool_size)
        try:
            # First: a key that did not sign this memory's checkpoints stops the start here.
            signer = None
            if settings.checkpoint_key is not None:
                async with pool.acquire() as conn:
                    signer = await checkpoints.open_key(
                        conn,
                        settings.checkpoint_key,
                        settings.database_url,
                        settings.new_checkpoint_key,
                    )
            cache = PolicyCache.empty()
            executor = Executor(pool, cache, settings.write_outcome_timeout)
            await ensure_policy(executor, settings)
            feed = FeedHub(url, engine, pool, cache, settings.feed)
            await feed.start()
            services = Services(
                engine=engine,
                pool=pool,
                executor=executor,
                policies=cache,
                feed=feed,
                max_response_bytes=settings.max_response_bytes,
            )
            anchor = asyncio.create_task(_checkpoints(pool, settings.checkpoint_seconds, signer))
            settle_heap()
            try:
                yield {"services": services}
            finally:
                anchor.cancel()
                with suppress(asyncio.CancelledError):
                    await anchor
                await feed.stop()
        finally:
            await pool.close()
            await engine.dispose()

    view = GraphQLView(settings)
    app = Starlette(
        routes=[
            # Every method reaches the view, which refuses the others as JSON.
            Route("/graphql", view),
            WebSocketRoute("/graphql", view),
            Mount(STATIC_PATH, app=static_app()),
            *dashboard_routes(),
            Route("/healthz", health),
        ],
        lifespan=lifespan,
    )
    return GatewayApp(app, view, settings)


class GatewayApp:
    """The gateway as one ASGI app: its guards first, then HTTP requests to /graphql
    straight to the view, everything else to Starlette (WebSocket, GraphiQL's files, the
    dashboard, health, the lifespan).

    The view answers every method and every failure of its own as JSON, so Starlette's
    error, exception and routing layers would add nothing on that way but CPU: 7% of a
    compiled read's gateway CPU (`record(id)` under wrk).
    """

    def __init__(self, starlette: Starlette, view: GraphQLView, settings: Settings) -> None:
        self.starlette = starlette
        self.view = view
        app: ASGIApp = BodySizeLimit(self._route, settings.max_body_bytes)
        caps = SocketCaps(
            settings.max_ws_connections,
            settings.max_ws_unauthenticated,
            settings.max_ws_unauthenticated_per_address,
        )
        self.sockets = SocketLimits(app, fitted(caps, open_files_limit()))
        app = self.sockets
        if settings.anonymous_agent is not None:
            app = LoopbackOnly(app)  # refused before anything is read
        self._app = SecurityHeaders(app)  # outermost: on every response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/graphql":
            await self.view(scope, receive, send)
        else:
            await self.starlette(scope, receive, send)


# Objects allocated between two collections of the youngest generation (CPython's
# default is 700): a 500-record ingestMany allocates hundreds of thousands of objects,
# almost all freed by reference counting, and with the default the collector ran
# thousands of times per call, each time also ageing what the call still held.
GC_YOUNG_THRESHOLD = 50_000


def settle_heap() -> None:
    """Once started: everything built so far (schema, caches, compiled statements)
    lives as long as the process, so the cyclic collector stops traversing it
    (`gc.freeze`), and young collections run less often. py-spy (--native) put 29% of
    a gateway's CPU in the collector during ingestMany before this."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


async def _checkpoints(pool: Pool, every: float, signer: Signer | None) -> None:
    """Anchor the ledger at an interval, off the write path; a failure waits for the next."""
    if every <= 0:
        return
    while True:
        await asyncio.sleep(every)
        try:
            async with pool.acquire() as conn:
                taken = await checkpoints.take(conn, signer)
            if taken.made is not None:
                log.info("checkpoint %s anchors %s new entries", taken.made.seq, taken.made.entries)
            for warning in taken.warnings():
                log.warning("checkpoint: %s", warning)
        except checkpoints.CheckpointError as exc:
            log.error("no checkpoint can be taken: %s", exc.message)
        except Exception:
            log.exception("checkpoint failed; the next interval tries again")


class LoopbackOnly:
    """Refuses every request to the tokenless development gateway not addressed to loopback.

    HTTP is answered 403; a WebSocket is accepted and closed with 4403, as strawberry
    closes one it rejects, so clients see one code for "not allowed here".
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        problem = loopback_problem(headers.get("host"), headers.get("origin"))
        if problem is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await refusal_response(403, problem, code="FORBIDDEN")(scope, receive, send)
        else:
            await receive()  # websocket.connect
            offered = scope.get("subprotocols") or []
            chosen = (
                GRAPHQL_TRANSPORT_WS_PROTOCOL if GRAPHQL_TRANSPORT_WS_PROTOCOL in offered else None
            )
            await send({"type": "websocket.accept", "subprotocol": chosen})
            # A close reason holds at most 123 bytes: the whole sentence goes to the log.
            log.info("WebSocket refused: %s", problem)
            await send(
                {"type": "websocket.close", "code": 4403, "reason": "Forbidden: loopback only"}
            )


async def ensure_policy(executor: Executor, settings: Settings) -> PolicyVersion | None:
    """Apply the policy `settings` names (or the development one, if none is in force and
    the gateway is a development one); the policy in force after it."""
    cache = executor.policies
    if settings.policy_yaml is not None:
        before = await policy_store.current(executor.pool, cache)
        if before is not None and before.yaml != settings.policy_yaml:
            log.warning(
                "policy file %s replaces version %s (applied by %s at %s)",
                settings.policy_source,
                before.version,
                before.applied_by,
                before.applied_at.isoformat(),
            )
        actor = DEV_POLICY_ACTOR if settings.policy_yaml == DEV_POLICY_YAML else "operator"
        command = ApplyPolicy(settings.policy_yaml, settings.policy_source, None, cache)
        applied = await executor.execute(actor, command)
        log.info("policy version %s in force (%s)", applied.version, settings.policy_source)
        return applied
    current = await policy_store.current(executor.pool, cache)
    if current is None and settings.anonymous_agent is not None:
        command = ApplyPolicy(DEV_POLICY_YAML, "development policy", None, cache)
        current = await executor.execute(DEV_POLICY_ACTOR, command)
        log.info("development policy version %s in force", current.version)
    return current
