"""The Starlette application: GraphQL over HTTP and WebSocket, the MCP tools, GraphiQL,
the dashboard, health and the landing page, behind the gateway's guards."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from gql.api.limits import BodySizeLimit
from gql.api.observe import configure_request_log
from gql.mcp.http import PATH as MCP_PATH
from gql.mcp.http import McpEndpoint
from gql.server.dashboard import dashboard_routes
from gql.server.frames import keep_raw_send
from gql.server.front import Front
from gql.server.graphiql import STATIC_PATH, static_app
from gql.server.hosts import HostCheck, Hosts
from gql.server.landing import landing_route
from gql.server.lean import Lean
from gql.server.lifespan import lifespan
from gql.server.metrics import Metrics, metrics_route, multiprocess_dir
from gql.server.settings import Settings
from gql.server.sockets import SocketCaps, SocketLimits, fitted, open_files_limit
from gql.server.view import GraphQLView
from gql.server.waiting import BODIES, Waiting, body_waiting_cap, waiting_cap
from gql.server.waiting import STATE_KEY as WAITING


def create_app(settings: Settings) -> GatewayApp:
    """The gateway as an ASGI app; the lifespan opens the database and the policy."""
    if settings.request_log:
        configure_request_log(every=settings.request_log_every, slow=settings.slow_request_seconds)
    view = GraphQLView(settings)
    mcp = McpEndpoint(settings.anonymous_agent, settings.request_timeout)
    metrics = Metrics(multiprocess_dir())
    open_files = open_files_limit()
    waiting = Waiting(waiting_cap(open_files), settings.header_timeout)
    bodies = Waiting(body_waiting_cap(open_files), settings.body_timeout, "request bodies")
    app = Starlette(
        routes=[
            landing_route(settings),
            # Every method reaches the view, which refuses the others as JSON.
            Route("/graphql", view),
            WebSocketRoute("/graphql", view),
            Mount(STATIC_PATH, app=static_app()),
            *dashboard_routes(),
            Route("/healthz", health),
            # The MCP tools (streamable HTTP), an ASGI app answering every method.
            Route(MCP_PATH, mcp),
            Route("/metrics", metrics_route(metrics)),
        ],
        lifespan=lifespan(
            settings,
            metrics,
            also=[mcp.server.session_manager.run],
            state={WAITING: waiting, BODIES: bodies},
        ),
    )
    return GatewayApp(app, view, settings, metrics, open_files)


class GatewayApp:
    """The gateway as one ASGI app: its guards first, then HTTP requests to /graphql
    straight to the view, everything else to Starlette (WebSocket, GraphiQL's files, the
    dashboard, health, the lifespan).

    The view answers every method and every failure of its own as JSON, so Starlette's
    error, exception and routing layers would add nothing on that way but CPU (measured in
    bench/README.md).
    """

    def __init__(
        self,
        starlette: Starlette,
        view: GraphQLView,
        settings: Settings,
        metrics: Metrics,
        open_files: int,
    ) -> None:
        self.starlette = starlette
        self.view = view
        self.metrics = metrics
        app: ASGIApp = BodySizeLimit(self._route, settings.max_body_bytes)
        caps = SocketCaps(
            settings.max_ws_connections,
            settings.max_ws_unauthenticated,
            settings.max_ws_unauthenticated_per_address,
        )
        self.sockets = SocketLimits(app, fitted(caps, open_files))
        app = self.sockets
        development = settings.anonymous_agent is not None
        hosts = Hosts(settings.allowed_hosts, development)
        # Refused before anything is read, in every mode (DNS rebinding).
        app = HostCheck(app, hosts)
        # Outermost: every request's note, security headers, log line and metrics.
        self.front = Front(app, metrics.request_done)
        # Compiled reads over HTTP, answered without the layers above; it hands them
        # every other request.
        self.lean = (
            None
            if view.compiled is None
            else Lean(
                view.compiled,
                self.front,
                hosts,
                settings.anonymous_agent,
                settings.request_timeout,
                lambda: view.stopped([]),
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/graphql" and self.lean is not None:
            await self.lean(scope, receive, send)
            return
        keep_raw_send(scope, send)  # the feed writes ready-made frames (gql.server.frames)
        await self.front(scope, receive, send)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/graphql":
            await self.view(scope, receive, send)
        else:
            await self.starlette(scope, receive, send)


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})
