"""The strawberry schema with its extensions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import strawberry
from graphql import GraphQLError
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

from gql.auth import PerOperationAuth
from gql.context import OperationScope
from gql.cost import DEFAULT_MAX_COST, QueryCostLimit
from gql.errors import ErrorCodes, ReportedParserCache
from gql.resolvers.mutation import Mutation
from gql.resolvers.query import Query
from gql.resolvers.subscription import Subscription
from gql.scalars import SCALARS

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


def extensions(max_query_cost: int) -> list[Callable[[], SchemaExtension] | type[SchemaExtension]]:
    """Factories: each request gets fresh extension objects; the parse and validation
    caches themselves live at module level in strawberry and are shared."""
    return [
        # First: every extension after it sees the operation's own context.
        OperationScope,
        PerOperationAuth,
        ErrorCodes,
        lambda: ReportedParserCache(maxsize=1024),
        lambda: ValidationCache(maxsize=1024),
        lambda: AddValidationRules(LIMIT_RULES),
        # After ValidationCache: it counts only documents that passed validation.
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


def build_schema(max_query_cost: int = DEFAULT_MAX_COST) -> Schema:
    """The schema with its limits; the types are shared by every schema built."""
    return Schema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        config=StrawberryConfig(scalar_map=SCALARS),
        extensions=extensions(max_query_cost),
        execution_context_class=AcyclicExecutionContext,
    )


schema = build_schema()
