"""`GET /`: what a person or a client finds at the gateway's root. It names where each part
is served, edgeloom's version and the mode the gateway runs in; HTML for a browser, JSON
for a client whose Accept header prefers it."""

from __future__ import annotations

import html

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from gql import edgeloom_version
from gql.server.settings import Settings

ENDPOINTS: tuple[tuple[str, str], ...] = (
    (
        "/graphql",
        "GraphQL over HTTP, and subscriptions over a WebSocket (graphql-transport-ws); "
        "GraphiQL in a browser",
    ),
    ("/dashboard", "the live feed: events, counts and a record's neighbourhood"),
    ("/mcp", "the MCP tools (streamable HTTP)"),
    ("/metrics", "Prometheus metrics (loopback, or a token whose agent may read_metrics)"),
    ("/healthz", "health: 200 while the gateway serves"),
)
MODES = {
    "development": "development: calls without a token act as agent 'dev' (loopback only)",
    "policy": "policy: every call needs a bearer token for an agent the policy declares",
}


def landing_route(settings: Settings) -> Route:
    """`/`, answering for the gateway these settings run."""
    mode = "development" if settings.anonymous_agent is not None else "policy"
    release = edgeloom_version()
    about = {"name": "edgeloom", "version": release, "mode": mode, "endpoints": dict(ENDPOINTS)}
    page = _page(release, mode)

    async def landing(request: Request) -> Response:
        if _prefers_json(request.headers.get("accept", "")):
            return JSONResponse(about)
        return HTMLResponse(page)

    return Route("/", landing, methods=["GET"])


def _prefers_json(accept: str) -> bool:
    """JSON when the Accept header names it before HTML (or names no HTML)."""
    kinds = [part.split(";", 1)[0].strip().lower() for part in accept.split(",")]
    if "application/json" not in kinds:
        return False
    return "text/html" not in kinds or kinds.index("application/json") < kinds.index("text/html")


def _text(text: str) -> str:
    return html.escape(text, quote=False)


def _page(release: str, mode: str) -> str:
    items = "\n".join(
        f'    <li><a href="{path}"><code>{path}</code></a> {_text(what)}</li>'
        for path, what in ENDPOINTS
    )
    return f"""<!doctype html>
<html lang="en">
  <head><meta charset="utf-8" /><title>edgeloom {_text(release)}</title></head>
  <body>
    <h1>edgeloom {_text(release)}</h1>
    <p>An exact, auditable, shared memory for AI agents. Mode: {_text(MODES[mode])}.</p>
    <ul>
{items}
    </ul>
  </body>
</html>
"""
