"""A read is a feature: declared once (`store.reads.registry`), it is answered by both paths.

The read below is what a new read is: one module (its arguments read once from GraphQL, its
binder, its own shape, its SQL for the compiled path, what it finds for the resolver), one
line registering it (here the fixture, as `store.kinds` registers the kinds' reads), and its
field on `Query` (`served`, and a resolver that renders what the read finds). Two gateways
on one database, one with the compiled path and one without, answer it alike, and the
compiled one answers it in its one statement.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
import strawberry

from gql.api.compiled.fields import compiled_field, served
from gql.api.reads import find
from gql.api.resolvers.query import Query
from gql.api.schema import build_schema, schema
from gql.api.types import Info
from gql.server import view
from store.reads import registry
from store.reads.compiled_sql import Compiler, Sel
from store.reads.registry import Before, Values, Wants
from store.reads.snapshot import Reader
from store.reads.visibility import RULE
from tests.conftest import GatewayFactory
from tests.gql._api import INGEST
from tests.gql._differential import compiled_path

FIELD = "recordCount"


# -- the read's module ----------------------------------------------------------


@dataclass(frozen=True)
class CountArgs:
    source_type: str | None
    lane: str | None


@dataclass(frozen=True)
class CountShape:
    source_type: bool


def _count_sql(lanes: str, source_type: str | None) -> str:
    of_type = "" if source_type is None else f" AND r.source_type = {source_type}"
    return f"SELECT count(*) FROM records r WHERE {RULE.record('r', lanes)}{of_type}"


@dataclass(frozen=True)
class RecordCount:
    """How many records you can read (of one source type, in one lane)."""

    field: str = FIELD
    before: Before | None = None

    def arguments(self, given: Mapping[str, Any]) -> CountArgs:
        return CountArgs(given.get("sourceType"), given.get("lane"))

    def bind(
        self, values: Values, prefix: str, args: CountArgs, lanes: Sequence[str]
    ) -> CountShape:
        values[prefix + "lanes"] = RULE.chosen(lanes, None if args.lane is None else [args.lane])
        values[prefix + "source_type"] = args.source_type
        return CountShape(args.source_type is not None)

    def sql(self, compiler: Compiler, sel: Sel, shape: CountShape) -> str:
        lanes = compiler.arg(sel.site, "lanes", "text[]")
        source_type = compiler.arg(sel.site, "source_type") if shape.source_type else None
        return f"({_count_sql(lanes, source_type)})"

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> int:
        args = self.arguments(given)
        chosen = RULE.chosen(lanes, None if args.lane is None else [args.lane])
        if args.source_type is None:
            return int(await db.fetchval(_count_sql("$1::text[]", None), chosen))
        sql = _count_sql("$1::text[]", "$2")
        return int(await db.fetchval(sql, chosen, args.source_type))


# -- its field on Query -----------------------------------------------------------


@strawberry.type(description="What can be read, and how many records.")
class CountingQuery(Query):
    @strawberry.field(description="How many records you can read.", metadata=served(FIELD))
    async def record_count(
        self,
        info: Info,
        source_type: Annotated[str | None, strawberry.argument(description="Of this type.")] = None,
        lane: Annotated[str | None, strawberry.argument(description="In this lane.")] = None,
    ) -> int:
        found: int = await find(info, FIELD)
        return found


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    registry.register(RecordCount())
    monkeypatch.setattr(view, "schema", build_schema(query=CountingQuery))
    try:
        yield
    finally:
        registry.unregister(FIELD)
    assert FIELD not in {r.field for r in registry.reads()}


def test_the_built_in_reads_are_registered_and_their_fields_served_by_them() -> None:
    fields = schema._schema.query_type
    assert fields is not None
    for name in ("record", "records", "gather", "search"):
        assert registry.read(name).field == name
        answer = compiled_field(fields.fields[name])
        assert answer is not None and answer.bind is not None
    # The search plans its text before its statement; the others need nothing first.
    assert compiled_field(fields.fields["search"]).before() is not None  # type: ignore[union-attr]
    assert compiled_field(fields.fields["records"]).before() is None  # type: ignore[union-attr]
    assert FIELD not in fields.fields


COUNT = "query($t: String, $lane: String) { recordCount(sourceType: $t, lane: $lane) }"
BOTH = '{ documents: recordCount(sourceType: "documentary") records(first: 1) { totalCount } }'


async def test_a_read_declared_in_a_test_is_served_by_both_paths(
    counting: None, start_gateway: GatewayFactory
) -> None:
    compiled = await start_gateway(anonymous_agent="dev")
    plain = await start_gateway(
        anonymous_agent="dev", database_url=compiled.database_url, compiled_path=False
    )
    assert plain.app.view.compiled is None
    for content, kind in (("a", "documentary"), ("b", "documentary"), ("c", "conversational")):
        await compiled.data(INGEST, {"input": {"content": content, "sourceType": kind}})
    path = compiled_path(compiled)
    cases: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        (COUNT, {}, {"recordCount": 3}),
        (COUNT, {"t": "documentary"}, {"recordCount": 2}),
        (COUNT, {"t": "conversational", "lane": "default"}, {"recordCount": 1}),
        (COUNT, {"lane": "elsewhere"}, {"recordCount": 0}),
        (BOTH, {}, {"documents": 2, "records": {"totalCount": 3}}),
    ]
    for query, variables, expected in cases:
        before = path.answered
        assert await compiled.data(query, variables) == expected
        assert path.answered == before + 1, (query, variables)
        assert await plain.data(query, variables) == expected
    # A wrong argument is refused alike, by the resolver on both.
    refused = "{ recordCount(sourceType: 1) }"
    assert (await compiled.post(refused)) == (await plain.post(refused))
