"""The seed's worked example, end to end over HTTP against a live gateway."""

from __future__ import annotations

from tests.support import Gateway

INGEST = """
mutation($input: IngestInput!) {
  ingest(input: $input) { id version properties edgeProperties { id property } }
}
"""


async def test_list_labels_ingest_and_gather_the_intersection(gateway: Gateway) -> None:
    before = await gateway.data("{ labels { label recordCount } }")
    counts = {row["label"]: row["recordCount"] for row in before["labels"]}

    sarah = await gateway.data(
        INGEST,
        {
            "input": {
                "content": "Sarah is the account owner for Acme.",
                "properties": ["org:Acme", "person:Sarah", "topic:renewal"],
            }
        },
    )
    other = await gateway.data(
        INGEST, {"input": {"content": "Acme pricing call.", "properties": ["org:Acme"]}}
    )

    after = await gateway.data("{ labels { label recordCount } }")
    now = {row["label"]: row["recordCount"] for row in after["labels"]}
    assert now["org"] == counts.get("org", 0) + 2
    assert now["person"] == counts.get("person", 0) + 1

    found = await gateway.data(
        """{ gather(match: ["org:Acme", "topic:renewal"], mode: INTERSECT) {
               totalCount items { id content } pageInfo { hasNextPage } } }"""
    )
    ids = [item["id"] for item in found["gather"]["items"]]
    assert sarah["ingest"]["id"] in ids
    assert other["ingest"]["id"] not in ids
    assert found["gather"]["totalCount"] == len(ids)
