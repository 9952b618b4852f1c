"""Who is calling: a bearer token's agent, or the development agent on loopback."""

from __future__ import annotations

from gql.context import Caller, Services
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
