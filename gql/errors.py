"""Turning domain refusals into GraphQL errors with codes, and masking everything else."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension

from policies.errors import PolicyError
from store.errors import StoreError

log = logging.getLogger("edgeloom.errors")

MASKED_MESSAGE = (
    "Unexpected error; it has been logged. Retry, or report it with the time of the call."
)


class UnauthenticatedError(Exception):
    """The call carries no valid bearer token."""

    code = "UNAUTHENTICATED"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def extensions(self) -> dict[str, object]:
        return {}


Refusal = PolicyError | StoreError | UnauthenticatedError


def to_graphql_error(error: GraphQLError) -> GraphQLError:
    """The error a client sees: a refusal with its code, an input error, or a masked failure."""
    original = error.original_error
    if isinstance(original, PolicyError | StoreError | UnauthenticatedError):
        return GraphQLError(
            original.message,
            nodes=error.nodes,
            source=error.source,
            positions=error.positions,
            path=error.path,
            extensions={"code": original.code, **original.extensions()},
        )
    if error.path is None or original is None:
        # Raised before execution (syntax, validation, variable coercion): the
        # message describes the caller's document and is safe to show.
        extensions = dict(error.extensions or {})
        extensions.setdefault("code", "BAD_USER_INPUT")
        return GraphQLError(
            error.message,
            nodes=error.nodes,
            source=error.source,
            positions=error.positions,
            path=error.path,
            extensions=extensions,
        )
    log.error("unexpected failure at %s", ".".join(map(str, error.path)), exc_info=original)
    return GraphQLError(
        MASKED_MESSAGE,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        extensions={"code": "INTERNAL_SERVER_ERROR"},
    )


class ErrorCodes(SchemaExtension):
    """Maps every error of a result in one place (see `to_graphql_error`)."""

    def on_operation(self) -> Iterator[None]:
        yield
        result = self.execution_context.result
        errors = getattr(result, "errors", None)
        if errors:
            result.errors = [to_graphql_error(e) for e in errors]  # type: ignore[union-attr]
