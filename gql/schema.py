"""The strawberry schema with its extensions."""

from __future__ import annotations

from collections.abc import Callable

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
from strawberry.types import ExecutionContext

from gql.auth import PerOperationAuth
from gql.context import OperationScope
from gql.errors import ErrorCodes, ReportedParserCache
from gql.resolvers.mutation import Mutation
from gql.resolvers.query import Query
from gql.scalars import SCALARS

# The depth and alias limits as validation rule classes, made once: each
# QueryDepthLimiter / MaxAliasesLimiter instance makes new rule classes, and the
# ValidationCache keys on the rule classes, so per-request instances never hit it.
MAX_TOKENS = 20_000
LIMIT_RULES = [
    *QueryDepthLimiter(max_depth=12).validation_rules,
    *MaxAliasesLimiter(max_alias_count=50).validation_rules,
]

# Factories: each request gets fresh extension objects; the parse and validation
# caches themselves live at module level in strawberry and are shared.
EXTENSIONS: list[Callable[[], SchemaExtension] | type[SchemaExtension]] = [
    # First: every extension after it sees the operation's own context.
    OperationScope,
    PerOperationAuth,
    ErrorCodes,
    lambda: ReportedParserCache(maxsize=1024),
    lambda: ValidationCache(maxsize=1024),
    lambda: AddValidationRules(LIMIT_RULES),
    lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
]


class Schema(strawberry.Schema):
    """Strawberry's schema, without its logging of every error with a traceback.

    Refusals are answers to the caller, not faults of the gateway; `ErrorCodes`
    logs the failures that are masked, with their tracebacks.
    """

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        return None


schema = Schema(
    query=Query,
    mutation=Mutation,
    config=StrawberryConfig(scalar_map=SCALARS),
    extensions=EXTENSIONS,
)
