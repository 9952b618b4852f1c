"""The host names a gateway answers to (DNS rebinding), and loopback names: where the
tokenless development gateway may listen.

Loopback alone does not keep a web page out, nor does a token: DNS rebinding points a
name the page controls at the gateway's address, and the browser then sends that name
as Host (and Origin) and reads the answers of any endpoint that needs no token (`/metrics`
from loopback, the development gateway). A request is answered only when its Host, and
its Origin when it has one, is a name the gateway was told it serves.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL

from gql.api.errors import refusal_response

log = logging.getLogger("edgeloom")

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
ALLOWED_HOSTS_VARIABLE = "EDGELOOM_ALLOWED_HOSTS"


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is loopback."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    address = _address(host)
    return address is not None and address.is_loopback


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def allowed_hosts(named: str | None) -> tuple[str, ...]:
    """The names in EDGELOOM_ALLOWED_HOSTS's form: comma-separated, blanks ignored."""
    return tuple(n.strip() for n in (named or "").split(",") if n.strip())


class Hosts:
    """Which Host and Origin names a gateway answers.

    The development gateway answers loopback names and addresses only. A gateway with a
    policy answers those, any IP address (rebinding needs a name the page controls, so an
    address in Host was asked for as such), and the names it was given (`allowed`: the
    name it listens on, `--allowed-host`, EDGELOOM_ALLOWED_HOSTS).
    """

    def __init__(self, allowed: Iterable[str], development: bool) -> None:
        self.development = development
        self.names = frozenset(
            name.lower() for name in allowed if not development and _address(name) is None
        )
        # Clients send the same few Host and Origin values on every request: each pair
        # is judged once (bench/README.md, "Figures behind choices in the code").
        self.problem = lru_cache(maxsize=256)(self._problem)

    def allows(self, name: str) -> bool:
        """Whether a request addressed to `name` (no port) is answered."""
        if is_loopback(name):
            return True
        if self.development:
            return False
        return _address(name) is not None or name.lower() in self.names

    def _problem(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with this Host and Origin is refused, or None."""
        name = _host_name(host or "")
        if name is None or not self.allows(name):
            addressed = repr(host) if host else "no Host header"
            return f"{self._allowed()} (this request was addressed to {addressed})"
        if origin is not None:
            try:
                origin_host = urlsplit(origin).hostname
            except ValueError:
                origin_host = None
            if origin_host is None or not self.allows(origin_host):
                return f"{self._allowed()} (this request came from a page at {origin!r})"
        return None

    def _allowed(self) -> str:
        if self.development:
            return (
                "in development mode (no policy, no token) the gateway answers only requests "
                "addressed to 127.0.0.1, localhost or [::1] (any port), from pages on those "
                "hosts; to serve other names, start with --policy FILE and give callers "
                "bearer tokens"
            )
        declared = ", ".join(sorted(self.names)) or "none"
        return (
            "the gateway answers only requests addressed to 127.0.0.1, localhost, [::1], "
            "an IP address or a name it was given (any port), from pages on those hosts; "
            f"names given: {declared}; an operator adds one with serve --allowed-host NAME "
            f"or {ALLOWED_HOSTS_VARIABLE}=NAME,..."
        )


def _host_name(host: str) -> str | None:
    """The name in a Host header value, without its port."""
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else None
    name = host.rpartition(":")[0] if ":" in host else host
    return name or None


class HostCheck:
    """Refuses every request whose Host or Origin names a host the gateway does not serve.

    HTTP is answered 403; a WebSocket is accepted and closed with 4403, as strawberry
    closes one it rejects, so clients see one code for "not allowed here".
    """

    def __init__(self, app: ASGIApp, hosts: Hosts) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        problem = self.hosts.problem(headers.get("host"), headers.get("origin"))
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
                {"type": "websocket.close", "code": 4403, "reason": "Forbidden: host not served"}
            )
