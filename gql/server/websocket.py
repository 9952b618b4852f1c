"""The WebSocket protocol (graphql-transport-ws) as strawberry speaks it, with two additions.

Strawberry indexes into a graphql-transport-ws message before checking its shape, so
`[1]` or a string payload ended the socket without a close code; here every message
is checked first (4400).

Each operation runs with a context of its own that carries its `Outlet`
(`gql.feed.outlet`), through which a subscription resolver may send a `next` message whose
payload is already encoded (the live feed renders an event once for every subscriber
running the same operation, and each socket only splices its operation id in front), and
its `SocketEnd`, through which it may ask for the socket to be closed after it.

A query or mutation sent over the socket has the time one HTTP request has
(`Settings.request_timeout`), and is stopped and answered the same way past it; a
subscription runs as long as its client wants, each of its statements (its initial read,
each event's) bounded by PostgreSQL's statement_timeout, set to the same time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from graphql import GraphQLError, OperationType, get_operation_ast
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

from gql.api.context import Context, SocketEnd
from gql.api.errors import error_extensions, parse_cached
from gql.api.limits import RequestLimitError, check_variables
from gql.api.stopped import CODE as STOPPED
from gql.api.stopped import stopped_details, stopped_message
from gql.feed.outlet import Outlet
from gql.server import sockets
from gql.server.frames import raw_socket
from gql.server.settings import Settings
from store.ledger.executor import COMPLETED_WRITES

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


def _subscribes(operation: Operation[Context, None]) -> bool:
    """Whether the operation is a subscription (one that does not parse is not: it fails
    at once)."""
    try:
        document = parse_cached(operation.query)
    except GraphQLError:
        return False
    found = get_operation_ast(document, operation.operation_name)
    return found is not None and found.operation is OperationType.SUBSCRIPTION


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

    @property
    def context(self) -> Context:
        """The context strawberry runs an operation with: in the operation's own task,
        its own (`run_operation`); elsewhere the connection's."""
        task = asyncio.current_task()
        found = None if task is None else self._operations_contexts.get(task)
        return self._connection_context if found is None else found

    @context.setter
    def context(self, context: Context) -> None:
        # Set once, by strawberry's constructor: the connection's context.
        self._connection_context = context
        self._operations_contexts: dict[asyncio.Task[Any], Context] = {}

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
        # Runs as the operation's own task: its context is seen by its resolvers only.
        task = asyncio.current_task()
        assert task is not None
        end = SocketEnd()
        outlet = _outlet(
            self.view,
            self.websocket,
            {"id": operation.id, "type": "next"},
            operation.query,
            operation.variables,
            operation.operation_name,
            lambda: not (operation.completed or self.closing),
        )
        self._operations_contexts[task] = dataclasses.replace(
            self._connection_context, outlet=outlet, socket_end=end
        )
        # The view is gql.server.view.GraphQLView, which this module cannot import.
        settings: Settings | None = getattr(self.view, "settings", None)
        seconds = None
        if settings is not None and not _subscribes(operation):
            seconds = settings.request_timeout
        completed: list[str] = []
        noted = COMPLETED_WRITES.set(completed)
        try:
            async with asyncio.timeout(seconds):
                await super().run_operation(operation)
        except TimeoutError:
            await self._stopped(operation, seconds or 0.0, len(completed))
        finally:
            COMPLETED_WRITES.reset(noted)
            del self._operations_contexts[task]
        if end.code is not None and not self.closing:
            self.closing = True
            await self.websocket.close(code=end.code, reason=end.reason)

    async def _stopped(
        self, operation: Operation[Context, None], seconds: float, done: int
    ) -> None:
        """Answers an operation stopped at its time limit as HTTP answers one (its writes
        not yet committing were rolled back), and completes it."""
        extensions = error_extensions(STOPPED, stopped_details(seconds, done))
        error = GraphQLError(stopped_message(seconds, done), extensions=extensions)
        payload: Any = {"data": None, "errors": [error.formatted]}
        with contextlib.suppress(WebSocketDisconnected, WebSocketDisconnect):
            await operation.send_operation_message(
                {"id": operation.id, "type": "next", "payload": payload}
            )
            await operation.send_operation_message({"id": operation.id, "type": "complete"})

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
