"""The WebSocket protocol (graphql-transport-ws) as strawberry speaks it, with two additions.

Strawberry indexes into a graphql-transport-ws message before checking its shape, so
`[1]` or a string payload ended the socket without a close code; here every message
is checked first (4400).

Each operation's task also gets an `Outlet` (in `current_outlet`), through which a
subscription resolver may send a `next` message whose payload is already encoded: the
live feed renders an event once for every subscriber running the same operation, and
each socket only splices its operation id in front.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from graphql import FieldNode, GraphQLError, Node, VariableNode, get_operation_ast, parse, visit
from graphql.language.visitor import SKIP, Visitor, VisitorAction
from starlette.websockets import WebSocketDisconnect
from strawberry.asgi import ASGIWebSocketAdapter
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    ConnectionInitMessage,
    Message,
)

from gql.api.context import Context
from gql.api.errors import error_extensions
from gql.api.limits import RequestLimitError, check_variables
from gql.server import sockets
from gql.server.frames import RawSocket, raw_socket

_OPTIONAL_OBJECTS = ("variables", "extensions")


def message_problem(message: object) -> str | None:
    """Why `message` is not a graphql-transport-ws message, or None when it is one."""
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return "each message must be a JSON object with a string 'type'"
    kind = message["type"]
    if kind in ("subscribe", "complete") and not (
        isinstance(message.get("id"), str) and message["id"]
    ):
        return f"a {kind} message needs a non-empty string 'id'"
    if kind == "connection_init" and not isinstance(message.get("payload", {}), dict | None):
        return "the connection_init payload must be a JSON object"
    if kind != "subscribe":
        return None
    payload = message.get("payload")
    if not isinstance(payload, dict) or not isinstance(payload.get("query"), str):
        return "a subscribe message needs a payload object with a string 'query'"
    for key in _OPTIONAL_OBJECTS:
        if not isinstance(payload.get(key), dict | None):
            return f"a subscribe payload's '{key}' must be a JSON object or null"
    if not isinstance(payload.get("operationName"), str | None):
        return "a subscribe payload's 'operationName' must be a string or null"
    return None


@dataclass(frozen=True)
class Outlet:
    """One running operation's way to send a result payload that is already encoded."""

    query: str
    variables: dict[str, object] | None
    operation_name: str | None
    encode: Callable[[object], str]
    """The transport's JSON encoder, for payloads sent through `send`."""
    head: str
    """The operation's message up to its payload: `{"id":"1","type":"next","payload":`."""
    send_text: Callable[[str], Awaitable[None]]
    open: Callable[[], bool]
    raw: RawSocket | None = None
    """The socket's transport, for the feed's group writes (None: not on this server)."""

    @property
    def share(self) -> Hashable:
        """Operations with equal keys render every event alike under equal rights.

        Variables used only in the arguments of the root field (a resume's `after`)
        decide which events the stream yields, not how one renders, so they are left
        out: subscribers resuming from different cursors share renderings once live.
        """
        root_only = _root_argument_variables(self.query, self.operation_name)
        rendering = {k: v for k, v in (self.variables or {}).items() if k not in root_only}
        return (self.query, self.operation_name, json.dumps(rendering, sort_keys=True))

    async def send(self, payload: str) -> None:
        """Send `payload` (an encoded result: `{"data":...}`) as this operation's message."""
        if self.open():
            await self.send_text(self.message(payload))

    def message(self, payload: str) -> str:
        """The operation's message carrying `payload`."""
        return self.head + payload + "}"


class _VariableUses(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.uses: Counter[str] = Counter()

    def enter_variable_definition(self, *_: object) -> VisitorAction:
        return SKIP  # a declaration, not a use

    def enter_variable(self, node: VariableNode, *_: object) -> None:
        self.uses[node.name.value] += 1


def _uses(node: Node) -> Counter[str]:
    visitor = _VariableUses()
    visit(node, visitor)
    return visitor.uses


def _root_argument_variables(query: str, operation_name: str | None) -> frozenset[str]:
    """The variables used nowhere but in the arguments of the operation's root fields."""
    try:
        document = parse(query)
    except GraphQLError:
        return frozenset()
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return frozenset()
    in_arguments: Counter[str] = Counter()
    for selection in operation.selection_set.selections:
        if isinstance(selection, FieldNode):
            for argument in selection.arguments or ():
                in_arguments.update(_uses(argument))
    everywhere = _uses(document)
    return frozenset(name for name, count in in_arguments.items() if everywhere[name] == count)


@dataclass
class SocketEnd:
    """Set by an operation that found the socket's credentials gone: once the operation
    has sent its last message, the socket is closed with `code` (its other operations
    would be refused the same way)."""

    code: int | None = None
    reason: str = ""


current_socket_end: ContextVar[SocketEnd | None] = ContextVar("edgeloom_socket_end", default=None)


def close_socket_after_operation(code: int, reason: str) -> None:
    """Close the current operation's socket with `code` once the operation has ended."""
    end = current_socket_end.get()
    if end is not None:
        end.code, end.reason = code, reason


current_outlet: ContextVar[Outlet | None] = ContextVar("edgeloom_outlet", default=None)
"""The outlet of the operation the current task runs (None: send results the usual way)."""


def _outlet(
    view: Any,
    websocket: object,
    envelope: dict[str, str],
    query: str,
    variables: dict[str, object] | None,
    operation_name: str | None,
    is_open: Callable[[], bool],
) -> Outlet | None:
    if not isinstance(websocket, ASGIWebSocketAdapter):
        return None
    encode: Callable[[object], str] = view.encode_json_string
    # The message as the handler would encode it, cut before its payload: spliced
    # back together it is the same JSON text.
    whole = encode({**envelope, "payload": None})
    if not whole.endswith("null}"):
        return None
    ws = websocket.ws

    async def send_text(text: str) -> None:
        try:
            await ws.send_text(text)
        except WebSocketDisconnect as exc:
            raise WebSocketDisconnected from exc

    return Outlet(
        query,
        variables,
        operation_name,
        encode,
        whole[: -len("null}")],
        send_text,
        is_open,
        raw_socket(ws.scope),
    )


class TransportWSHandler(BaseGraphQLTransportWSHandler[Context, None]):
    """Closes the socket with 4400 on a malformed message; refuses oversized variables;
    an acknowledged connection leaves the caps on unauthenticated ones (gql.server.sockets)."""

    # Set once an operation found the socket's credentials gone and the gateway closes it.
    closing = False

    async def send_message(self, message: Message) -> None:
        # The socket's other operations (and its pings) may still be running when the
        # gateway closes it; what they would send after the close is dropped, not an error.
        if not self.closing:
            await super().send_message(message)

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        await super().handle_connection_init(message)
        if self.connection_acknowledged and isinstance(self.websocket, ASGIWebSocketAdapter):
            sockets.authenticated(self.websocket.ws.scope)

    async def run_operation(self, operation: Operation[Context, None]) -> None:
        # Runs as the operation's own task: the outlet is seen by its resolvers only.
        current_outlet.set(
            _outlet(
                self.view,
                self.websocket,
                {"id": operation.id, "type": "next"},
                operation.query,
                operation.variables,
                operation.operation_name,
                lambda: not (operation.completed or self.closing),
            )
        )
        end = SocketEnd()
        current_socket_end.set(end)
        await super().run_operation(operation)
        if end.code is not None and not self.closing:
            self.closing = True
            await self.websocket.close(code=end.code, reason=end.reason)

    async def handle_message(self, message: Message) -> None:
        problem = message_problem(message)
        if problem is not None:
            await self.handle_invalid_message(problem)
            return
        if message["type"] == "subscribe" and self.connection_acknowledged:
            try:
                check_variables(message["payload"].get("variables"))
            except RequestLimitError as exc:
                extensions = error_extensions("BAD_USER_INPUT", exc.details)
                error = GraphQLError(exc.message, extensions=extensions)
                await self.send_message(
                    {"id": message["id"], "type": "error", "payload": [error.formatted]}
                )
                return
        await super().handle_message(message)
