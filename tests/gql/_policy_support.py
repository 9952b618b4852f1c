"""Helpers for the policy, token and isolation tests: minting tokens, common operations."""

from __future__ import annotations

from typing import Any

from store.database import create_engine
from store.operations import tokens
from tests.gql._api import ADD, INGEST, INGEST_MANY, RECORD_FIELDS, REMOVE, UPDATE
from tests.support import Gateway

RECORD = f"""
query($id: ID!) {{ record(id: $id) {{ {RECORD_FIELDS} versions {{ number policyVersion }} }} }}
"""
APPLY = "mutation($yaml: String!) { applyPolicy(yaml: $yaml) { version yaml appliedAt appliedBy } }"
POLICY = "{ policy { version yaml appliedAt appliedBy } }"


async def mint(gateway: Gateway, *agents: str) -> dict[str, str]:
    """A fresh bearer token for each agent, minted with the store's own API."""
    engine = create_engine(gateway.database_url, pool_size=1)
    try:
        return {agent: (await tokens.create(engine, agent))[1] for agent in agents}
    finally:
        await engine.dispose()


async def ingest(gateway: Gateway, token: str, **fields: Any) -> dict[str, Any]:
    """Write one record that must be accepted; returns the record."""
    record: dict[str, Any] = (await gateway.data(INGEST, {"input": fields}, token))["ingest"]
    return record


def without_id(error: dict[str, Any], ident: str) -> dict[str, Any]:
    """An error with the id it echoes blanked, to compare refusals about different ids."""
    extensions = {k: v for k, v in error.get("extensions", {}).items() if k != "id"}
    return {"message": error["message"].replace(ident, "<id>"), "extensions": extensions}


__all__ = ["ADD", "INGEST", "INGEST_MANY", "REMOVE", "UPDATE"]
