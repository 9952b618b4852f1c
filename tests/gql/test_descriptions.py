"""Every type, field, argument and enum value of schema.graphql says what it is: the
one text GraphiQL's docs pane, an agent's introspection and the MCP tools all read."""

from __future__ import annotations

from pathlib import Path

from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLObjectType,
    GraphQLSchema,
    build_schema,
)

BUILT_IN = {"String", "Int", "Float", "Boolean", "ID"}


def undescribed(schema: GraphQLSchema) -> list[str]:
    missing = []
    for name, kind in schema.type_map.items():
        if name.startswith("__") or name in BUILT_IN:
            continue
        if not kind.description:
            missing.append(f"type {name}")
        if isinstance(kind, GraphQLObjectType | GraphQLInterfaceType | GraphQLInputObjectType):
            for field_name, field in kind.fields.items():
                if not field.description:
                    missing.append(f"{name}.{field_name}")
                for arg_name, arg in getattr(field, "args", {}).items():
                    if not arg.description:
                        missing.append(f"{name}.{field_name}({arg_name})")
        if isinstance(kind, GraphQLEnumType):
            missing += [f"{name}.{v}" for v, value in kind.values.items() if not value.description]
    return missing


def test_every_part_of_schema_graphql_is_described(repo: Path) -> None:
    sdl = (repo / "schema.graphql").read_text(encoding="utf-8")
    missing = undescribed(build_schema(sdl))
    assert not missing, f"describe these in the code, then regenerate schema.graphql: {missing}"


def test_the_check_finds_what_is_left_undescribed() -> None:
    sdl = '"""A query."""\ntype Query {\n  """Described."""\n  a(x: Int): Int\n  b: Int\n}\n'
    assert undescribed(build_schema(sdl)) == ["Query.a(x)", "Query.b"]
