"""Turning domain refusals into GraphQL errors with codes, and masking everything else."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from functools import lru_cache

from graphql import GraphQLError, parse
from starlette.responses import JSONResponse
from strawberry.extensions import ParserCache, SchemaExtension
from strawberry.types.execution import StreamExecutionResult

from gql.api.observe import note_error, note_operation, request_id
from gql.api.operation_label import label_of
from gql.api.session import UnauthenticatedError
from policies.errors import PolicyError
from store.errors import StoreError, refusal_for

log = logging.getLogger("edgeloom.errors")

MASKED_MESSAGE = (
    "Unexpected error; it has been logged. Retry, or report it with the time of the call."
)


Refusal = PolicyError | StoreError | UnauthenticatedError


def to_graphql_error(error: GraphQLError) -> GraphQLError:
    """The error a client sees: a refusal with its code, an input error, or a masked
    failure; each carries the request's id (`requestId`), which its log line has."""
    original = error.original_error
    if original is not None:
        original = refusal_for(original) or original
    if isinstance(original, Refusal):
        return _reworded(error, original.message, {"code": original.code, **original.extensions()})
    if error.path is None or original is None:
        # Raised before execution (syntax, validation, variable coercion): the
        # message describes the caller's document and is safe to show.
        extensions = dict(error.extensions or {})
        extensions.setdefault("code", "BAD_USER_INPUT")
        return _reworded(error, error.message, extensions)
    log.error(
        "unexpected failure at %s (request %s)",
        ".".join(map(str, error.path)),
        request_id(),
        exc_info=original,
    )
    return _reworded(error, MASKED_MESSAGE, {"code": "INTERNAL_SERVER_ERROR"})


def _reworded(error: GraphQLError, message: str, extensions: dict[str, object]) -> GraphQLError:
    """`error` at the same place in the document, with this message and these extensions
    (and the request's id)."""
    note_error(extensions.get("code"))
    identifier = request_id()
    if identifier is not None:
        extensions["requestId"] = identifier
    return GraphQLError(
        message,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        extensions=extensions,
    )


def refusal_response(
    status: int,
    message: str,
    code: str = "BAD_USER_INPUT",
    details: Mapping[str, object] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A request refused before GraphQL runs, in the shape of a GraphQL error."""
    extensions = error_extensions(code, details)
    return JSONResponse(
        {"errors": [{"message": message, "extensions": extensions}]},
        status_code=status,
        headers=headers,
    )


def error_extensions(code: str, details: Mapping[str, object] | None = None) -> dict[str, object]:
    """The extensions of an error answered outside strawberry: its code, its details and
    the request's id."""
    note_error(code)
    extensions: dict[str, object] = {"code": code, **(details or {})}
    identifier = request_id()
    if identifier is not None:
        extensions["requestId"] = identifier
    return extensions


class ErrorCodes(SchemaExtension):
    """Maps every error of a result in one place (see `to_graphql_error`)."""

    def on_operation(self) -> Iterator[None]:
        self._streamed = False
        yield
        context = self.execution_context
        document = context.graphql_document
        name = context.operation_name
        if document is not None and context.query is not None:
            label = label_of(context.schema._schema, context.query, name, document)
            note_operation(label, name)
        if self._streamed:
            return
        result = self.execution_context.result
        errors = getattr(result, "errors", None)
        if errors:
            result.errors = [to_graphql_error(e) for e in errors]  # type: ignore[union-attr]

    def on_stream_result(self, result: StreamExecutionResult) -> Iterator[None]:
        """Maps each result an operation over WebSocket yields, before it is sent."""
        self._streamed = True
        errors = getattr(result, "errors", None)
        if errors:
            result.errors = [to_graphql_error(e) for e in errors]  # type: ignore[union-attr]
        yield


PARSED_DOCUMENTS = 1024

parse_cached = lru_cache(maxsize=PARSED_DOCUMENTS)(parse)
"""graphql-core's parse, cached: shared by the compiled path, which parses a document
first, and strawberry, which finds it parsed when the compiled path declines it."""


class ReportedParserCache(ParserCache):
    """ParserCache whose syntax errors reach `ErrorCodes` like every other error, on
    the cache the compiled path parses into (`parse_cached`).

    ParserCache parses in its hook, where an error escapes the operation and so
    skips `ErrorCodes`; leaving the document unparsed makes strawberry parse it
    again inside its own error handling, which puts the error in the result.
    """

    def __init__(self) -> None:
        super().__init__(maxsize=PARSED_DOCUMENTS)
        self.cached_parse_document = parse_cached

    def on_parse(self) -> Iterator[None]:
        context = self.execution_context
        try:
            context.graphql_document = self.cached_parse_document(
                context.query, **context.parse_options
            )
        except Exception:
            context.graphql_document = None
        yield
