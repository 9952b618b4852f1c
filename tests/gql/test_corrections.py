"""Corrections: attached beside the record, which keeps every version as written."""

from __future__ import annotations

import re

from tests.conftest import GatewayFactory
from tests.gql._api import AUDIT, ingest
from tests.gql._asserted import CORRECT, asserted
from tests.gql._policy_support import ingest as ingest_as
from tests.gql._policy_support import mint
from tests.support import Gateway, sql

EVENT = """
query($id: ID!) { auditEvent(id: $id) { kind recordId payload before { number } after { number } } }
"""


async def test_a_correction_is_kept_beside_the_original(gateway: Gateway) -> None:
    record = await ingest(gateway, "The renewal is due in March.", ["topic:renewal"])
    before = await asserted(gateway, record["id"])
    assert before["corrected"] is False and before["corrections"] == []
    made = (
        await gateway.data(
            CORRECT,
            {"id": record["id"][:10], "content": "It is due in April.", "reason": "contract"},
        )
    )["correct"]
    assert re.match(r"^co_[0-9a-f]{32}$", made["id"])
    assert made["recordId"] == record["id"] and made["recordVersion"] == 1
    assert made["actor"] == "dev" and made["reason"] == "contract"
    second = (await gateway.data(CORRECT, {"id": record["id"], "content": "Or May."}))["correct"]
    assert second["reason"] is None

    now = await asserted(gateway, record["id"])
    # The record is untouched: same version, same content, same history.
    assert now["version"] == 1 and now["content"] == record["content"]
    assert now["versions"] == before["versions"]
    assert now["corrected"] is True
    assert [c["id"] for c in now["corrections"]] == [made["id"], second["id"]]
    # As of before the first correction, it had none.
    then = await asserted(gateway, record["id"], as_of=record["updatedAt"])
    assert then["corrected"] is False

    events = (await gateway.data(AUDIT, {"recordId": record["id"]}))["audit"]["items"]
    assert [e["kind"] for e in events] == ["sr_ingested", "corrected", "corrected"]
    corrected = (await gateway.data(EVENT, {"id": events[1]["id"]}))["auditEvent"]
    assert corrected["payload"]["correctionId"] == made["id"]
    # A correction is not a record version, so the event shows none.
    assert corrected["before"] is None and corrected["after"] is None

    async with sql(gateway.database_url) as conn:
        kinds = await conn.fetch(
            "SELECT kind, version FROM ledger WHERE object_id = $1", made["id"]
        )
    assert [tuple(k) for k in kinds] == [("correction", 1)]


async def test_a_correction_needs_content_and_an_existing_record(gateway: Gateway) -> None:
    record = await ingest(gateway, "x")
    error = await gateway.error(CORRECT, {"id": record["id"], "content": "  "})
    assert error["extensions"]["code"] == "BAD_USER_INPUT" and "needs content" in error["message"]
    error = await gateway.error(CORRECT, {"id": "sr_" + "0" * 32, "content": "y"})
    assert error["extensions"]["code"] == "NOT_FOUND"


POLICY = """
lanes:
  alpha: {}
  beta: {}
agents:
  writer: { read: [alpha, beta], write: [alpha, beta] }
  reader: { read: [alpha], write: [] }
  other: { read: [beta], write: [beta] }
"""


async def test_correcting_needs_write_access_and_reads_follow_the_lane(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(POLICY)
    tokens = await mint(gateway, "writer", "reader", "other")
    record = await ingest_as(gateway, tokens["writer"], content="x", lane="alpha")
    error = await gateway.error(CORRECT, {"id": record["id"], "content": "y"}, tokens["reader"])
    assert error["extensions"]["code"] == "FORBIDDEN"
    await gateway.data(CORRECT, {"id": record["id"], "content": "y"}, tokens["writer"])
    assert (await asserted(gateway, record["id"], token=tokens["reader"]))["corrected"] is True
    error = await gateway.error(CORRECT, {"id": record["id"], "content": "z"}, tokens["other"])
    assert error["extensions"]["code"] == "NOT_FOUND"
