"""The tools over streamable HTTP at /mcp, on the gateway's own app: the same bearer
tokens, the same host names (gql.server.hosts wraps the whole app), and the SDK's session
manager run by the app's lifespan."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from gql.api.auth import authorize
from gql.api.errors import refusal_response
from gql.api.session import Caller, Services, Session
from gql.mcp.run import caller_session, mcp_session
from gql.mcp.server import build_server

PATH = "/mcp"
CALLER = "mcp_caller"
NO_STREAM = (
    "GET /mcp would open a stream of server-initiated messages, and this gateway sends "
    "none (every call is answered on its own request): send tool calls with POST"
)


class HttpGate:
    """A tool call's caller: the Authorization header of the HTTP request carrying it."""

    def __init__(self, anonymous_agent: str | None, time_limit: float) -> None:
        self.anonymous_agent = anonymous_agent
        self.time_limit = time_limit

    async def session(self, ctx: Context[Any, Any]) -> Session:
        request = ctx.request_context.request
        assert isinstance(request, Request)
        services: Services = request.state.services
        # Decided by McpEndpoint for this very request, as the GraphQL view decides it.
        caller: Caller | None = getattr(request.state, CALLER, None)
        if caller is not None and caller.agent is not None:
            return mcp_session(services, caller)
        return await caller_session(
            services, request.headers.get("authorization"), self.anonymous_agent
        )


class McpEndpoint:
    """/mcp: a request without a valid token is refused (401, as on /graphql) before the
    MCP layer reads it; each tool call is authorised again from its own request."""

    def __init__(self, anonymous_agent: str | None, time_limit: float) -> None:
        self.anonymous_agent = anonymous_agent
        self.server: MCPServer[Any] = build_server(HttpGate(anonymous_agent, time_limit))
        # One transport per request (stateless): any gateway replica answers any call,
        # and no session outlives its request. DNS rebinding is refused by the gateway's
        # own host check (gql.server.hosts), which the SDK's would duplicate.
        self.app: ASGIApp = self.server.streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "GET":
            # A GET opens a stream for messages the server sends unasked; a stateless
            # server has none to send, so the stream would only hold a connection open
            # (MCP's streamable HTTP lets a server answer 405 instead).
            refused = refusal_response(405, NO_STREAM)
            refused.headers["allow"] = "POST"
            await refused(scope, receive, send)
            return
        services: Services = scope["state"]["services"]
        headers = dict(scope.get("headers") or [])
        raw = headers.get(b"authorization")
        caller = await authorize(
            None if raw is None else raw.decode("latin-1"), services, self.anonymous_agent
        )
        if caller.agent is None:
            refused = refusal_response(
                401,
                caller.problem or "authentication required",
                "UNAUTHENTICATED",
                caller.details,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await refused(scope, receive, send)
            return
        # uvicorn gives each request its own copy of the state; this one carries the caller.
        state = {**scope["state"], CALLER: caller}
        await self.app({**scope, "state": state}, receive, send)
