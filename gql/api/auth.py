"""Who is calling: a bearer token's agent, or the development agent on loopback, when
the policy in force declares it. One function decides it for every transport."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from gql.api.observe import note_agent
from gql.api.session import Caller, Services
from policies.errors import UnknownAgentError
from store.kinds.policy import in_force as policy_store
from store.operations import tokens

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


async def authorize(
    authorization: str | None, services: Services, anonymous_agent: str | None
) -> Caller:
    """The caller an Authorization value (`Bearer <token>`, from a header, a WebSocket's
    connection_init payload or any other transport) names, or why it is refused: a live
    token is not enough, its agent must be one the policy in force declares.

    With no policy in force the caller is returned: what it asks is then refused for
    that where it is asked. Never raises, so the refusal reaches the client its way.
    """
    caller = await authenticate(authorization, services, anonymous_agent)
    if caller.agent is None:
        return caller
    note_agent(caller.agent)  # for the request's log line, declared by the policy or not
    in_force = await policy_store.current(services.pool, services.policies)
    if in_force is not None and caller.agent not in in_force.policy.agents:
        undeclared = UnknownAgentError(caller.agent)
        return Caller(agent=None, problem=undeclared.message, details=undeclared.extensions())
    return caller


async def authenticate(
    authorization: str | None, services: Services, anonymous_agent: str | None
) -> Caller:
    """The caller named by an Authorization value, whether the policy declares it or not
    (an open socket's operations check the token again; the policy, when they use it)."""
    if not authorization:
        if anonymous_agent is not None:
            return Caller(agent=anonymous_agent)
        return Caller(agent=None, problem=NO_TOKEN)
    scheme, _, secret = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return Caller(agent=None, problem=BAD_SCHEME)
    checked = await tokens.check(services.engine, secret.strip())
    if checked.expired_at is not None:
        return Caller(agent=None, problem=expired(checked.expired_at))
    if checked.agent is None:
        return Caller(agent=None, problem=BAD_TOKEN)
    return Caller(agent=checked.agent)


def expired(at: datetime) -> str:
    when = at.astimezone(UTC).isoformat(timespec="seconds")
    return (
        f"the bearer token expired at {when}; an operator mints a new one with "
        "'edgeloom token create --agent NAME' (or 'edgeloom token rotate ID' before it expires)"
    )


def socket_authorization(params: Mapping[str, object] | None) -> str | None:
    """The Authorization value a WebSocket's connection_init payload carries, if any."""
    raw = (params or {}).get("authorization") or (params or {}).get("Authorization")
    return raw if isinstance(raw, str) else None
