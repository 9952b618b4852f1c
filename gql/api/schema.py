"""The strawberry schema with its extensions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import strawberry
from graphql import GraphQLError
from graphql.validation.rules import overlapping_fields_can_be_merged
from graphql.validation.validate import ValidationAbortedError
from strawberry.extensions import (
    AddValidationRules,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
    SchemaExtension,
    ValidationCache,
)
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.types import ExecutionContext

from gql.api.context import OperationScope, PerOperationAuth
from gql.api.cost import DEFAULT_MAX_COST, QueryCostLimit
from gql.api.errors import ErrorCodes, ReportedParserCache
from gql.api.limits import DEFAULT_MAX_FIELDS, too_many_fields
from gql.api.resolvers.mutation import Mutation
from gql.api.resolvers.query import Query
from gql.api.resolvers.subscription import Subscription
from gql.api.scalars import SCALARS

# The depth and alias limits as validation rule classes, made once: each
# QueryDepthLimiter / MaxAliasesLimiter instance makes new rule classes, and the
# ValidationCache keys on the rule classes, so per-request instances never hit it.
MAX_DEPTH = 12
MAX_ALIASES = 50
MAX_TOKENS = 20_000
LIMIT_RULES = [
    *QueryDepthLimiter(max_depth=MAX_DEPTH).validation_rules,
    *MaxAliasesLimiter(max_alias_count=MAX_ALIASES).validation_rules,
]
# The steps graphql-core may spend checking that fields sharing a response name merge
# (it compares them pairwise, and fragments with each other) before it stops validating.
# Its own default lets one document hold the event loop for most of a second; this one
# stays far above what any document within the field limit needs unless it repeats one
# field hundreds of times. graphql-core reads it when each validation starts.
MAX_VALIDATION_WORK = 50_000
overlapping_fields_can_be_merged.MAX_COMPLEXITY_BUDGET = MAX_VALIDATION_WORK


class BoundedValidation(ValidationCache):
    """Strawberry's cached validation, after a count of the document's fields, and with
    graphql-core's "Validation aborted." said as the limit it is."""

    def __init__(self, max_fields: int, maxsize: int) -> None:
        super().__init__(maxsize=maxsize)
        self.max_fields = max_fields

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        refusal = None if document is None else too_many_fields(document, self.max_fields)
        if refusal is not None:
            context.pre_execution_errors = [refusal]
            yield
            return
        try:
            errors: list[GraphQLError] = self.cached_validate_document(
                context.schema._schema, document, context.validation_rules
            )
        except Exception:
            # A rule that fails on an odd document (strawberry's depth limiter on `{}`):
            # the document is refused like any invalid one, not answered as a failure
            # without a code, and the same way on every path.
            errors = [
                GraphQLError(
                    "this document cannot be validated (a validation rule failed on it); "
                    "send an operation whose every selection set selects at least one field",
                    extensions={"code": "BAD_USER_INPUT"},
                )
            ]
        # The cached list is shared by every request with this document: replaced, not edited.
        context.pre_execution_errors = [_said_as_a_limit(error) for error in errors]
        yield


def _said_as_a_limit(error: GraphQLError) -> GraphQLError:
    if not isinstance(error, ValidationAbortedError):
        return error
    if error.message.startswith("Too many validation errors"):
        return GraphQLError(
            "validation stopped after the errors listed before this one, the most one "
            "document is checked for; fix them and send the document again",
            extensions={"code": "BAD_USER_INPUT"},
        )
    return GraphQLError(
        f"validating this document takes more than {MAX_VALIDATION_WORK:,} steps, the most "
        "one document may take: fields that share a response name are compared in pairs, "
        "and fragments with each other; select each field once per selection set, use "
        "fewer fragments, and split the rest into several requests",
        extensions={"code": "BAD_USER_INPUT", "maxValidationWork": MAX_VALIDATION_WORK},
    )


def extensions(
    max_query_cost: int, max_fields: int
) -> list[Callable[[], SchemaExtension] | type[SchemaExtension]]:
    """Factories: each request gets fresh extension objects; the parse and validation
    caches themselves live at module level in strawberry and are shared."""
    return [
        # First: every extension after it sees the operation's own context.
        OperationScope,
        PerOperationAuth,
        ErrorCodes,
        ReportedParserCache,
        lambda: BoundedValidation(max_fields, maxsize=1024),
        lambda: AddValidationRules(LIMIT_RULES),
        # After the validation: it counts only documents that passed it.
        lambda: QueryCostLimit(max_query_cost),
        lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
    ]


class AcyclicExecutionContext(StrawberryGraphQLCoreExecutionContext):
    """Strawberry's execution context, freed by reference counting when a request ends.

    graphql-core keeps two of the context's bound methods in its `async_helpers`: a
    reference cycle through the context, its variables, fields and our `Context`, about
    forty-five objects a request that only the cyclic collector frees. At several hundred
    writes a second that garbage made the collector run every few seconds for tens of
    milliseconds. Once the response is built no resolver runs any more, so the cycle is
    broken there.
    """

    def build_response(self, data: dict[str, Any] | None) -> Any:
        response = super().build_response(data)
        del self.async_helpers
        return response


class Schema(strawberry.Schema):
    """Strawberry's schema, without its logging of every error with a traceback.

    Refusals are answers to the caller, not faults of the gateway; `ErrorCodes`
    logs the failures that are masked, with their tracebacks.
    """

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        return None


def build_schema(
    max_query_cost: int = DEFAULT_MAX_COST,
    max_fields: int = DEFAULT_MAX_FIELDS,
    query: type[Query] = Query,
) -> Schema:
    """The schema with its limits; the types are shared by every schema built (`query`:
    the query type, `Query` or one that adds fields to it)."""
    return Schema(
        query=query,
        mutation=Mutation,
        subscription=Subscription,
        config=StrawberryConfig(scalar_map=SCALARS),
        extensions=extensions(max_query_cost, max_fields),
        execution_context_class=AcyclicExecutionContext,
    )


schema = build_schema()
