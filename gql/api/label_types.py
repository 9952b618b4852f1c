"""The GraphQL types of what records are labelled with: labels in use and #tags found
in content, each with how many readable records carry it."""

from __future__ import annotations

import strawberry

from gql.api.compiled.fields import compiled
from store.reads import compiled_sql as sql


@strawberry.type(description="A label in use, with how many records you can read carry it.")
class LabelCount:
    label: str = strawberry.field(
        description="A label in use.", metadata=compiled(sql.column("label"))
    )
    record_count: int = strawberry.field(
        description="How many records you can read carry it.",
        metadata=compiled(sql.column("record_count")),
    )


@strawberry.type(description="A #tag found in record content, with how many records hold it.")
class TagCount:
    tag: str = strawberry.field(description="The tag as found in content, lower case, without '#'.")
    record_count: int = strawberry.field(
        description="How many current records you may read hold it in their content."
    )
