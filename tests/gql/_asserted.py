"""GraphQL documents and helpers for asserted edges, corrections and traverse."""

from __future__ import annotations

from typing import Any

from tests.gql._api import AUDIT
from tests.support import Gateway

EDGE_FIELDS = "id hint createdAt actor active endedAt endedBy records { id version }"
CONNECT = f"""
mutation($a: ID!, $b: ID!, $hint: String!) {{
  connect(a: $a, b: $b, hint: $hint) {{ {EDGE_FIELDS} }}
}}
"""
DISCONNECT = f"mutation($id: String!) {{ disconnect(id: $id) {{ {EDGE_FIELDS} }} }}"
GROUP = f"""
mutation($ids: [ID!]!, $hint: String!) {{
  group(recordIds: $ids, hint: $hint) {{
    {EDGE_FIELDS} members(first: 2) {{ totalCount items {{ id }} pageInfo {{ hasNextPage }} }}
  }}
}}
"""
UNGROUP = f"""
mutation($id: String!, $ids: [ID!]) {{
  ungroup(id: $id, recordIds: $ids) {{
    {EDGE_FIELDS} history {{ recordId change at actor }}
    members {{ totalCount items {{ id }} }}
  }}
}}
"""
UNADJUST = f"""
mutation($id: ID!, $adjustment: String!) {{
  unadjust(recordId: $id, adjustment: $adjustment) {{ {EDGE_FIELDS} }}
}}
"""
CORRECT = """
mutation($id: ID!, $content: String!, $reason: String) {
  correct(recordId: $id, content: $content, reason: $reason) {
    id recordId recordVersion content reason actor at
  }
}
"""
ASSERTED = f"""
query($id: ID!, $asOf: DateTime) {{
  record(id: $id, asOf: $asOf) {{
    id version content properties edgeProperties {{ property memberCount }}
    connections {{ {EDGE_FIELDS} }}
    groups {{ {EDGE_FIELDS} }}
    adjustments {{ {EDGE_FIELDS} }}
    corrected corrections {{ id recordId recordVersion content reason actor at }}
    versions {{ number event properties content }}
  }}
}}
"""
TRAVERSE = """
query($from: ID!, $depth: Int, $labels: [String!], $asOf: DateTime, $limit: Int,
      $edgeTypes: [String!]) {
  traverse(from: $from, depth: $depth, labels: $labels, asOf: $asOf, limit: $limit,
           edgeTypes: $edgeTypes) {
    items { record { id } hop via edge { id type detector evidence } }
    notShown notShownExact beyondLimit clipped { via hop memberCount }
  }
}
"""


async def connect(gateway: Gateway, a: str, b: str, hint: str = "works_with") -> dict[str, Any]:
    edge: dict[str, Any] = (await gateway.data(CONNECT, {"a": a, "b": b, "hint": hint}))["connect"]
    return edge


async def group(gateway: Gateway, ids: list[str], hint: str = "team") -> dict[str, Any]:
    edge: dict[str, Any] = (await gateway.data(GROUP, {"ids": ids, "hint": hint}))["group"]
    return edge


async def asserted(
    gateway: Gateway, record_id: str, as_of: str | None = None, token: str | None = None
) -> dict[str, Any]:
    data = await gateway.data(ASSERTED, {"id": record_id, "asOf": as_of}, token)
    record: dict[str, Any] = data["record"]
    return record


async def events(gateway: Gateway, record_id: str) -> list[tuple[str, dict[str, Any]]]:
    data = await gateway.data(AUDIT, {"recordId": record_id, "first": 500})
    return [(e["kind"], e["payload"]) for e in data["audit"]["items"]]


async def walk(gateway: Gateway, start: str, token: str | None = None, **kw: Any) -> dict[str, Any]:
    found: dict[str, Any] = (await gateway.data(TRAVERSE, {"from": start, **kw}, token))["traverse"]
    return found


def ids(edge: dict[str, Any]) -> list[str]:
    return [r["id"] for r in edge["records"]]
