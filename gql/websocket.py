"""graphql-transport-ws as strawberry speaks it, refusing malformed messages with 4400.

Strawberry indexes into a message before checking its shape, so `[1]` or a string
payload ended the socket without a close code; here every message is checked first.
"""

from __future__ import annotations

from graphql import GraphQLError
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import Message

from gql.context import Context
from gql.limits import RequestLimitError, check_variables

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


class TransportWSHandler(BaseGraphQLTransportWSHandler[Context, None]):
    """Closes the socket with 4400 on a malformed message; refuses oversized variables."""

    async def handle_message(self, message: Message) -> None:
        problem = message_problem(message)
        if problem is not None:
            await self.handle_invalid_message(problem)
            return
        if message["type"] == "subscribe" and self.connection_acknowledged:
            try:
                check_variables(message["payload"].get("variables"))
            except RequestLimitError as exc:
                extensions = {"code": "BAD_USER_INPUT", **exc.details}
                error = GraphQLError(exc.message, extensions=extensions)
                await self.send_message(
                    {"id": message["id"], "type": "error", "payload": [error.formatted]}
                )
                return
        await super().handle_message(message)
