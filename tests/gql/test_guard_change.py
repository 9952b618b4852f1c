"""The guard decides on what a change writes, never on values it leaves alone."""

from __future__ import annotations

from tests.conftest import GatewayFactory
from tests.gql._policy_support import ADD, APPLY, RECORD, REMOVE, UPDATE, mint
from tests.gql.test_guard_api import Crm


async def crm_gateway(start_gateway: GatewayFactory, crm_yaml: str) -> Crm:
    gateway = await start_gateway(policy_yaml=crm_yaml)
    return Crm(gateway, await mint(gateway, "curator", "sales"))


async def test_a_label_added_by_add_properties_does_not_freeze_the_record(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    crm = await crm_gateway(start_gateway, crm_yaml)
    deal = await crm.ingest(
        "sales", content="Acme", lane="crm", sourceType="deal", properties=["org:Acme"]
    )
    # `person` is in the lane's combined list (contact, meeting) but not the deal type's.
    await crm.data(ADD, {"id": deal["id"], "properties": ["person:Sam"]}, "sales")
    updated = await crm.data(UPDATE, {"id": deal["id"], "content": "Acme, signed"}, "sales")
    assert updated["update"]["content"] == "Acme, signed"
    assert updated["update"]["version"] == 3
    assert sorted(updated["update"]["properties"]) == ["org:Acme", "person:Sam"]
    # What the change adds is still checked, and the refusal names only that.
    error = await crm.error(UPDATE, {"id": deal["id"], "properties": ["title:CEO"]}, "sales")
    assert error["message"] == (
        "label(s) ['title'] not allowed for source_type 'deal' in lane 'crm'; "
        "allowed: ['org', 'stage', 'topic']"
    )
    # Removing the label the type does not allow is always possible.
    removed = await crm.data(REMOVE, {"id": deal["id"], "labels": ["person"]}, "sales")
    assert removed["removeProperties"]["removed"] == ["person:Sam"]


async def test_a_tightened_policy_leaves_existing_records_editable(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    crm = await crm_gateway(start_gateway, crm_yaml)
    meeting = await crm.ingest(
        "sales",
        content="Renewal call",
        lane="crm",
        sourceType="meeting",
        properties=["org:Acme", "topic:renewal"],
    )
    # The new policy no longer lets meetings carry `topic`.
    tightened = crm_yaml.replace(
        "meeting: { authority: documentary, allowed_labels: [person, org, topic] }",
        "meeting: { authority: documentary, allowed_labels: [person, org] }",
    )
    assert tightened != crm_yaml
    await crm.data(APPLY, {"yaml": tightened}, "curator")
    updated = await crm.data(
        UPDATE, {"id": meeting["id"], "content": "Renewal call, moved to May"}, "sales"
    )
    assert updated["update"]["version"] == 2
    assert sorted(updated["update"]["properties"]) == ["org:Acme", "topic:renewal"]
    kept = await crm.data(UPDATE, {"id": meeting["id"], "properties": ["org:Acme Corp"]}, "sales")
    assert sorted(kept["update"]["properties"]) == ["org:Acme Corp", "topic:renewal"]
    # Writing the label anew is what the tightened policy refuses.
    error = await crm.error(UPDATE, {"id": meeting["id"], "properties": ["topic:pricing"]}, "sales")
    assert error["message"] == (
        "label(s) ['topic'] not allowed for source_type 'meeting' in lane 'crm'; "
        "allowed: ['org', 'person']"
    )
    record = await crm.data(RECORD, {"id": meeting["id"]}, "sales")
    assert record["record"]["version"] == 3
