"""GraphQL documents and helpers shared by the typed-edge tests."""

from __future__ import annotations

from typing import Any

from tests.support import Gateway

EDGE_FIELDS = """
  id fromId toId type weight namespace confidence detector provenanceActor provenanceType
  evidence conflictState resolution resolver winnerId validAt invalidAt expiredAt createdAt
  updatedAt version
"""
UPSERT = f"mutation($input: EdgeInput!) {{ upsertEdge(input: $input) {{ {EDGE_FIELDS} }} }}"
RETIRE = f"""
mutation($id: ID!, $invalidAt: DateTime) {{
  retireEdge(id: $id, invalidAt: $invalidAt) {{ {EDGE_FIELDS} }}
}}
"""
RESOLVE = f"""
mutation($edgeId: ID!, $resolution: ConflictResolution!, $resolver: String!, $winnerId: ID) {{
  resolveConflict(edgeId: $edgeId, resolution: $resolution, resolver: $resolver,
                  winnerId: $winnerId) {{ {EDGE_FIELDS} }}
}}
"""
EDGES = f"""
query($fromId: ID, $toId: ID, $type: String, $namespace: String, $asOf: DateTime,
      $includeExpired: Boolean, $first: Int, $after: String) {{
  edges(fromId: $fromId, toId: $toId, type: $type, namespace: $namespace, asOf: $asOf,
        includeExpired: $includeExpired, first: $first, after: $after) {{
    totalCount items {{ {EDGE_FIELDS} }} pageInfo {{ hasNextPage endCursor }}
  }}
}}
"""
RELATED = """
query($id: ID!, $namespace: String, $asOf: DateTime, $first: Int, $after: String) {
  related(id: $id, namespace: $namespace, asOf: $asOf) {
    recordId record { id }
    outgoing(first: $first, after: $after) {
      totalCount items { id type toId toRecord { id content } }
      pageInfo { hasNextPage endCursor }
    }
    incoming(first: $first) {
      totalCount items { id type fromId fromRecord { id content } }
      pageInfo { hasNextPage endCursor }
    }
  }
}
"""
CONFLICTS = """
query($status: ConflictStatus, $lanes: [String!], $first: Int, $after: String) {
  conflicts(status: $status, lanes: $lanes, first: $first, after: $after) {
    totalCount
    items { id conflictState resolution resolver winnerId provenanceActor provenanceType
            evidence fromRecord { id content } toRecord { id content } }
    pageInfo { hasNextPage endCursor }
  }
}
"""
EGO = """
query($nodes: [ID!]!, $hops: Int, $direction: Direction, $types: [String!], $limit: Int,
      $asOf: DateTime, $includeExpired: Boolean) {
  ego(nodes: $nodes, hops: $hops, direction: $direction, types: $types, limit: $limit,
      asOf: $asOf, includeExpired: $includeExpired) {
    edges { id type weight fromId toId } hops neighbors { id }
    notShown { expiredExcluded edgesClipped typeFiltered danglingIds }
  }
}
"""


async def upsert(gateway: Gateway, token: str | None = None, **fields: Any) -> dict[str, Any]:
    """An upsert that must be accepted; the edge it returned."""
    edge: dict[str, Any] = (await gateway.data(UPSERT, {"input": fields}, token))["upsertEdge"]
    return edge


async def edges(gateway: Gateway, token: str | None = None, **args: Any) -> dict[str, Any]:
    page: dict[str, Any] = (await gateway.data(EDGES, args, token))["edges"]
    return page


async def ego(gateway: Gateway, token: str | None = None, **args: Any) -> dict[str, Any]:
    view: dict[str, Any] = (await gateway.data(EGO, args, token))["ego"]
    return view
