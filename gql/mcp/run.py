"""One tool call as one GraphQL operation: the caller is authorised by `gql.api.auth`, a
`Session` carries it, and a fixed document runs on the strawberry schema, so every tool
goes through the same resolvers, guard, executor, ledger and audit events as GraphQL."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_types import CallToolResult, TextContent

from gql.api.auth import authorize
from gql.api.context import Context
from gql.api.errors import Refusal
from gql.api.schema import schema
from gql.api.session import Caller, Services, Session, UnauthenticatedError
from policies.errors import PolicyError
from store.errors import StoreError
from store.reads.replicas import Freshness


@dataclass(frozen=True)
class Refused(Exception):
    """A call refused with a GraphQL error's message, code and details."""

    message: str
    code: str
    details: Mapping[str, object]

    def result(self) -> CallToolResult:
        body = {"error": self.message, "code": self.code, **self.details}
        return CallToolResult(
            content=[TextContent(type="text", text=_compact(body))],
            structured_content=body,
            is_error=True,
        )


def bad_input(message: str, **details: object) -> Refused:
    return Refused(message, "BAD_USER_INPUT", details)


REFUSALS = (PolicyError, StoreError, UnauthenticatedError)


def refused(exc: Refusal) -> Refused:
    """A domain refusal raised in the adapter itself, as GraphQL would answer it."""
    return Refused(exc.message, exc.code, exc.extensions())


async def caller_session(
    services: Services, authorization: str | None, anonymous_agent: str | None
) -> Session:
    """The caller's session, or the refusal `authorize` gave, as GraphQL would answer it."""
    caller: Caller = await authorize(authorization, services, anonymous_agent)
    if caller.agent is None:
        raise Refused(caller.problem or "authentication required", "UNAUTHENTICATED", {})
    return mcp_session(services, caller)


def mcp_session(services: Services, caller: Caller) -> Session:
    """A tool call's session. It reads on the primary: an MCP client sends no LSN back,
    and an agent's next call must see what its last one wrote."""
    return Session(services, caller, freshness=Freshness(primary=True))


async def run(session: Session, document: str, variables: Mapping[str, Any]) -> dict[str, Any]:
    """The document's data with snake_case keys, or the refusal of its first error."""
    result = await schema.execute(
        document, variable_values=dict(variables), context_value=Context(session)
    )
    if result.errors:
        first = result.errors[0]
        extensions = dict(first.extensions or {})
        code = str(extensions.pop("code", "BAD_USER_INPUT"))
        message = "; ".join(e.message for e in result.errors)
        raise Refused(message, code, extensions)
    assert result.data is not None
    converted: dict[str, Any] = snake(result.data)
    return converted


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def snake(value: Any) -> Any:
    """GraphQL's camelCase field names as the tools' snake_case; an event's payload is
    kept as the store wrote it."""
    if isinstance(value, dict):
        return {
            _CAMEL.sub("_", k).lower(): (v if k == "payload" else snake(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [snake(v) for v in value]
    return value


def answer(body: dict[str, Any]) -> CallToolResult:
    """A tool's result: compact JSON text, and the same object as structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=_compact(body))], structured_content=body
    )


def _compact(body: Mapping[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str)
