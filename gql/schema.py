"""The strawberry schema with its extensions."""

from __future__ import annotations

from collections.abc import Callable

import strawberry
from strawberry.schema.config import StrawberryConfig
from strawberry.extensions import (
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    SchemaExtension,
    ValidationCache,
)

from gql.errors import ErrorCodes
from gql.resolvers.mutation import Mutation
from gql.resolvers.query import Query
from gql.scalars import SCALARS

# Factories: each request gets fresh extension objects; the parse and validation
# caches themselves live at module level in strawberry and are shared.
EXTENSIONS: list[Callable[[], SchemaExtension] | type[SchemaExtension]] = [
    ErrorCodes,
    lambda: ParserCache(maxsize=1024),
    lambda: ValidationCache(maxsize=1024),
    lambda: QueryDepthLimiter(max_depth=12),
    lambda: MaxAliasesLimiter(max_alias_count=50),
    lambda: MaxTokensLimiter(max_token_count=20_000),
]

schema = strawberry.Schema(
    query=Query,
    mutation=Mutation,
    config=StrawberryConfig(scalar_map=SCALARS),
    extensions=EXTENSIONS,
)
