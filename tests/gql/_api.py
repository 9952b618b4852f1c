"""GraphQL documents and small helpers shared by the memory-core tests."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support import Gateway

RECORD_FIELDS = """
  id lane sourceType authority content version createdAt updatedAt createdBy properties
  edgeProperties { id property label value }
"""

INGEST = f"mutation($input: IngestInput!) {{ ingest(input: $input) {{ {RECORD_FIELDS} }} }}"
INGEST_MANY = (
    f"mutation($inputs: [IngestInput!]!) {{ ingestMany(inputs: $inputs) {{ {RECORD_FIELDS} }} }}"
)
RECORD = (
    f"query($id: ID!, $asOf: DateTime) {{ record(id: $id, asOf: $asOf) {{ {RECORD_FIELDS} }} }}"
)
UPDATE = f"""
mutation($id: ID!, $content: String, $properties: [String!], $expectedVersion: Int) {{
  update(id: $id, content: $content, properties: $properties, expectedVersion: $expectedVersion)
  {{ {RECORD_FIELDS} }}
}}
"""
ADD = f"""
mutation($id: ID!, $properties: [String!]!) {{
  addProperties(id: $id, properties: $properties) {{
    added alreadyHeld rejected record {{ {RECORD_FIELDS} }}
  }}
}}
"""
REMOVE = f"""
mutation($id: ID!, $labels: [String!], $properties: [String!]) {{
  removeProperties(id: $id, labels: $labels, properties: $properties) {{
    removed notHeld added alreadyHeld rejected record {{ {RECORD_FIELDS} }}
  }}
}}
"""
AUDIT = """
query($recordId: ID, $kinds: [String!], $first: Int, $after: String) {
  audit(recordId: $recordId, kinds: $kinds, first: $first, after: $after) {
    totalCount
    items { id cursor kind recordId lane actor at payload }
    pageInfo { hasNextPage endCursor }
  }
}
"""
GATHER = """
query($match: [String!]!, $mode: GatherMode, $asOf: DateTime, $first: Int, $after: String,
      $lanes: [String!]) {
  gather(match: $match, mode: $mode, asOf: $asOf, first: $first, after: $after, lanes: $lanes) {
    totalCount
    items { id content properties createdAt }
    pageInfo { hasNextPage endCursor }
  }
}
"""


def unique(stem: str = "") -> str:
    """A value no other test uses, so tests sharing a database stay apart."""
    return f"{stem}{uuid.uuid4().hex[:12]}"


async def ingest(
    gateway: Gateway, content: str, properties: list[str] | None = None, **fields: Any
) -> dict[str, Any]:
    """Write one record that must be accepted; the record as `ingest` returned it."""
    data = await gateway.data(
        INGEST, {"input": {"content": content, "properties": properties or [], **fields}}
    )
    record: dict[str, Any] = data["ingest"]
    return record


async def read(gateway: Gateway, record_id: str, as_of: str | None = None) -> dict[str, Any] | None:
    data = await gateway.data(RECORD, {"id": record_id, "asOf": as_of})
    record: dict[str, Any] | None = data["record"]
    return record


async def audit_total(gateway: Gateway, record_id: str | None = None) -> int:
    data = await gateway.data(AUDIT, {"recordId": record_id})
    total: int = data["audit"]["totalCount"]
    return total


async def record_total(gateway: Gateway) -> int:
    data = await gateway.data("{ records { totalCount } }")
    total: int = data["records"]["totalCount"]
    return total


async def gather_ids(
    gateway: Gateway, match: list[str], mode: str = "INTERSECT", **kw: Any
) -> list[str]:
    data = await gateway.data(GATHER, {"match": match, "mode": mode, **kw})
    return [item["id"] for item in data["gather"]["items"]]


RETIRE_RECORD = f"""
mutation($id: ID!, $reason: String) {{
  retireRecord(id: $id, reason: $reason) {{ {RECORD_FIELDS} retired {{ at actor reason }} }}
}}
"""
RESTORE_RECORD = f"""
mutation($id: ID!) {{ restoreRecord(id: $id) {{ {RECORD_FIELDS} retired {{ at actor reason }} }} }}
"""
