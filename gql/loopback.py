"""Loopback names: where the tokenless development gateway may listen, and whom it answers
(`LoopbackOnly` refuses everyone else)."""

from __future__ import annotations

import ipaddress
import logging
from functools import lru_cache
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL

from gql.errors import refusal_response

log = logging.getLogger("edgeloom")

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is loopback."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# Clients send the same few Host and Origin values on every request: each pair is
# parsed once (bench/README.md, "Figures behind choices in the code").
@lru_cache(maxsize=256)
def loopback_problem(host: str | None, origin: str | None) -> str | None:
    """Why a request to the tokenless development gateway is refused, or None.

    Loopback alone does not keep a web page out: DNS rebinding points a name the page
    controls at 127.0.0.1, and the browser then sends that name as Host (and Origin).
    """
    allowed = (
        "in development mode (no policy, no token) the gateway answers only requests "
        "addressed to 127.0.0.1, localhost or [::1] (any port), from pages on those hosts; "
        "to serve other names, start with --policy FILE and give callers bearer tokens"
    )
    name = _host_name(host or "")
    if name is None or not is_loopback(name):
        addressed = repr(host) if host else "no Host header"
        return f"{allowed} (this request was addressed to {addressed})"
    if origin is not None:
        try:
            origin_host = urlsplit(origin).hostname
        except ValueError:
            origin_host = None
        if origin_host is None or not is_loopback(origin_host):
            return f"{allowed} (this request came from a page at {origin!r})"
    return None


def _host_name(host: str) -> str | None:
    """The name in a Host header value, without its port."""
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else None
    name = host.rpartition(":")[0] if ":" in host else host
    return name or None


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
