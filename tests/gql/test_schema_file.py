"""The committed schema.graphql is exactly what the code exports."""

from __future__ import annotations

from pathlib import Path

from strawberry.printer import print_schema

from gql.api.schema import schema


def test_schema_graphql_matches_the_code(repo: Path) -> None:
    committed = (repo / "schema.graphql").read_text(encoding="utf-8")
    assert print_schema(schema).strip() == committed.strip(), (
        "schema.graphql is stale: run "
        "'.venv/bin/strawberry export-schema gql.api.schema:schema --output schema.graphql'"
    )


def test_pages_are_named_page_with_items_never_relay_connections() -> None:
    sdl = print_schema(schema)
    assert "Connection {" not in sdl.replace("type Connection {", "")
    for page in ("RecordPage", "AuditPage"):
        block = sdl.split(f"type {page} {{", 1)[1].split("}", 1)[0]
        assert "items:" in block and "totalCount: Int!" in block and "pageInfo: PageInfo!" in block
