"""A retried write returns what the caller wrote, never what it may not read."""

from __future__ import annotations

from tests.conftest import GatewayFactory
from tests.gql._policy_support import INGEST, UPDATE, mint

SCRIBE = "  scribe: { read: [notes], write: [crm] }\n"
RETRY_FIELDS = "id version content properties versions { number content }"
RETRY = f"mutation($input: IngestInput!) {{ ingest(input: $input) {{ {RETRY_FIELDS} }} }}"


async def test_a_write_only_agent_retrying_a_key_sees_only_its_own_write(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(policy_yaml=crm_yaml.replace("agents:\n", "agents:\n" + SCRIBE))
    tokens = await mint(gateway, "scribe", "curator")
    request = {
        "content": "Call Acme about the renewal.",
        "lane": "crm",
        "sourceType": "meeting",
        "properties": ["org:Acme"],
        "idempotencyKey": "scribe-1",
    }
    first = (await gateway.data(RETRY, {"input": request}, tokens["scribe"]))["ingest"]
    assert first["version"] == 1
    # Someone who may read crm changes the record afterwards.
    await gateway.data(
        UPDATE,
        {
            "id": first["id"],
            "content": "Acme signed; price is confidential.",
            "properties": ["org:Acme Corp"],
        },
        tokens["curator"],
    )
    again = (await gateway.data(RETRY, {"input": request}, tokens["scribe"]))["ingest"]
    assert again["id"] == first["id"]
    assert again["version"] == 1
    assert again["content"] == "Call Acme about the renewal."
    assert again["properties"] == ["org:Acme"]
    # Its history is not readable to the scribe either.
    assert again["versions"] == []
    # And the same key for another write is a conflict, not a window onto the record.
    other = await gateway.error(INGEST, {"input": {**request, "content": "x"}}, tokens["scribe"])
    assert other["extensions"]["code"] == "CONFLICT"
    assert "confidential" not in str(other)
