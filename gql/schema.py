"""The strawberry schema with its extensions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.extensions import (
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    ValidationCache,
)

from gql.errors import ErrorCodes
from gql.resolvers.mutation import Mutation
from gql.resolvers.query import Query
from gql.scalars import DateTime

# Instances, not classes: the caches must outlive a single request.
EXTENSIONS: list[Any] = [
    ErrorCodes,
    ParserCache(maxsize=1024),
    ValidationCache(maxsize=1024),
    QueryDepthLimiter(max_depth=12),
    MaxAliasesLimiter(max_alias_count=50),
    MaxTokensLimiter(max_token_count=20_000),
]

schema = strawberry.Schema(
    query=Query,
    mutation=Mutation,
    scalar_overrides={datetime: DateTime},
    extensions=EXTENSIONS,
)
