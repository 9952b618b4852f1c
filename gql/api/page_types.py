"""The page info every page type shares: where a page stands in its list."""

from __future__ import annotations

from typing import TypeVar

import strawberry

from gql.api.compiled.fields import compiled
from store.reads import compiled_sql as sql
from store.reads.pages import Page

T = TypeVar("T")


@strawberry.type(description="Where a page stands in its list.")
class PageInfo:
    has_next_page: bool = strawberry.field(
        description="Whether another page follows this one.",
        metadata=compiled(sql.Compiler.has_next_page),
    )
    end_cursor: str | None = strawberry.field(
        description="Pass as `after` for the next page; null when the page is empty.",
        metadata=compiled(sql.Compiler.end_cursor),
    )


def page_info(page: Page[T]) -> PageInfo:
    return PageInfo(has_next_page=page.has_next_page, end_cursor=page.end_cursor)
