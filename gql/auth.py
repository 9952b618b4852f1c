"""Who is calling: a bearer token's agent, or the development agent on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from strawberry.extensions import SchemaExtension

from gql.context import Caller, Context, Services
from store import tokens

NO_TOKEN = (
    "this gateway needs a bearer token: send the header 'Authorization: Bearer <token>' "
    '(over WebSocket, connection_init payload {"authorization": "Bearer <token>"}); '
    "an operator mints one with 'edgeloom token create --agent NAME'"
)
BAD_SCHEME = "the Authorization value must be 'Bearer <token>'"
BAD_TOKEN = (
    "the bearer token is unknown or has been revoked; "
    "an operator mints a new one with 'edgeloom token create --agent NAME'"
)


async def authenticate(
    authorization: str | None, services: Services, anonymous_agent: str | None
) -> Caller:
    """The caller named by an Authorization value; never raises, so errors reach the client."""
    if not authorization:
        if anonymous_agent is not None:
            return Caller(agent=anonymous_agent)
        return Caller(agent=None, problem=NO_TOKEN)
    scheme, _, secret = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return Caller(agent=None, problem=BAD_SCHEME)
    agent = await tokens.agent_for(services.engine, secret.strip())
    if agent is None:
        return Caller(agent=None, problem=BAD_TOKEN)
    return Caller(agent=agent)


def socket_authorization(params: Mapping[str, object] | None) -> str | None:
    """The Authorization value a WebSocket's connection_init payload carries, if any."""
    raw = (params or {}).get("authorization") or (params or {}).get("Authorization")
    return raw if isinstance(raw, str) else None


class PerOperationAuth(SchemaExtension):
    """Starts every operation afresh; on a WebSocket, checks its token again.

    A socket's one context serves every operation for as long as it stays open, so
    each must be decided under the token and the policy as they are when it runs.
    """

    async def on_operation(self) -> AsyncIterator[None]:
        context = self.execution_context.context
        if isinstance(context, Context):
            context.begin_operation()
            raw = socket_authorization(context.connection_params)
            if raw is not None and context.caller.agent is not None:
                context.caller = await authenticate(raw, context.services, None)
        yield
