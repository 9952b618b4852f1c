"""The source-type guard over the API: each refusal word for word, on every write path."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import GatewayFactory
from tests.gql._policy_support import ADD, INGEST, INGEST_MANY, RECORD, UPDATE, ingest, mint
from tests.support import Gateway

REPORT = json.dumps({"title": "Q3 renewal", "body": "Acme renews."})


@dataclass(frozen=True)
class Crm:
    gateway: Gateway
    tokens: dict[str, str]

    async def error(self, query: str, variables: dict[str, Any], agent: str) -> dict[str, Any]:
        return await self.gateway.error(query, variables, self.tokens[agent])

    async def data(self, query: str, variables: dict[str, Any], agent: str) -> dict[str, Any]:
        return await self.gateway.data(query, variables, self.tokens[agent])

    async def ingest(self, agent: str = "curator", **fields: Any) -> dict[str, Any]:
        return await ingest(self.gateway, self.tokens[agent], **fields)

    async def count(self, agent: str = "curator") -> int:
        data = await self.data("{ records(first: 1) { totalCount } }", {}, agent)
        total: int = data["records"]["totalCount"]
        return total


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Crm:
    gateway = await start_gateway(policy_yaml=crm_yaml)
    return Crm(gateway, await mint(gateway, "curator", "sales", "planner"))


def refused(error: dict[str, Any], code: str, message: str) -> dict[str, Any]:
    assert error["message"] == message, error
    assert error["extensions"]["code"] == code, error
    extensions: dict[str, Any] = error["extensions"]
    return extensions


# -- the seed's refusals, word for word ---------------------------------------------------


async def test_open_lane_takes_only_the_builtins(crm: Crm) -> None:
    error = await crm.error(
        INGEST, {"input": {"content": "x", "lane": "notes", "sourceType": "meeting"}}, "curator"
    )
    extensions = refused(
        error,
        "BAD_USER_INPUT",
        "lane 'notes' is open — source_type must be a builtin ['conversational', 'documentary'] "
        "(got 'meeting').",
    )
    assert extensions["allowed"] == ["conversational", "documentary"]


async def test_closed_lane_refuses_the_builtins(crm: Crm) -> None:
    for source_type in (None, "conversational"):
        error = await crm.error(
            INGEST,
            {"input": {"content": "x", "lane": "crm", "sourceType": source_type}},
            "curator",
        )
        extensions = refused(
            error,
            "BAD_USER_INPUT",
            "lane 'crm' is closed — source_type must be one of "
            "['contact', 'deal', 'meeting', 'report'] (got 'conversational'); "
            "builtins are excluded in a closed lane.",
        )
        assert extensions["allowed"] == ["contact", "deal", "meeting", "report"]
    error = await crm.error(
        INGEST, {"input": {"content": "x", "lane": "crm", "sourceType": "documentary"}}, "curator"
    )
    assert "(got 'documentary')" in error["message"]


async def test_label_outside_the_type_is_refused(crm: Crm) -> None:
    seed_call = {
        "content": "Renewal call with Acme.",
        "sourceType": "meeting",
        "lane": "crm",
        "properties": ["org:Acme", "budget:120k"],
    }
    error = await crm.error(INGEST, {"input": seed_call}, "curator")
    extensions = refused(
        error,
        "BAD_USER_INPUT",
        "label(s) ['budget'] not allowed for source_type 'meeting' in lane 'crm'; "
        "allowed: ['org', 'person', 'topic']",
    )
    assert extensions["allowed"] == ["org", "person", "topic"]


async def test_closed_value_is_refused_with_values_in_order(crm: Crm) -> None:
    deal = {"content": "Acme deal", "sourceType": "deal", "lane": "crm"}
    error = await crm.error(
        INGEST, {"input": {**deal, "properties": ["org:Acme", "stage:maybe"]}}, "sales"
    )
    extensions = refused(
        error,
        "BAD_USER_INPUT",
        "value 'maybe' not allowed for label 'stage' on source_type 'deal' in lane 'crm'; "
        "allowed values (in order): ['lead', 'proposal', 'won', 'lost']",
    )
    assert extensions["allowed"] == ["lead", "proposal", "won", "lost"]
    accepted = await crm.ingest("sales", **deal, properties=["org:Acme", "stage:won"])
    assert accepted["properties"] == ["org:Acme", "stage:won"]


async def test_report_content_must_be_json_with_its_keys(crm: Crm) -> None:
    report = {"sourceType": "report", "lane": "crm", "properties": ["org:Acme"]}
    not_json = await crm.error(INGEST, {"input": {**report, "content": "Q3: fine"}}, "curator")
    assert not_json["extensions"]["code"] == "BAD_USER_INPUT"
    assert not_json["message"].startswith(
        "content must be JSON for source_type 'report' in lane 'crm'; got invalid JSON ("
    )
    missing = await crm.error(
        INGEST, {"input": {**report, "content": '{"body": "no title"}'}}, "curator"
    )
    extensions = refused(
        missing,
        "BAD_USER_INPUT",
        "content for source_type 'report' in lane 'crm' is missing required key(s) ['title']; "
        "required: ['title']",
    )
    assert extensions["required"] == ["title"]
    assert extensions["missing"] == ["title"]
    array = await crm.error(INGEST, {"input": {**report, "content": "[1, 2]"}}, "curator")
    assert array["message"] == (
        "content for source_type 'report' in lane 'crm' must be a JSON object with keys "
        "['title']; got a JSON array"
    )
    written = await crm.ingest(**report, content=REPORT)
    assert (written["sourceType"], written["authority"]) == ("report", "documentary")


# -- authority follows the type ----------------------------------------------------------


async def test_authority_is_stamped_from_the_type(crm: Crm) -> None:
    meeting = await crm.ingest(
        content="Call", lane="crm", sourceType="meeting", properties=["org:Acme"]
    )
    assert meeting["authority"] == "documentary"
    plain = await crm.ingest(content="a thought", lane="notes")
    assert (plain["sourceType"], plain["authority"]) == ("conversational", "conversational")
    doc = await crm.ingest(content="a memo", lane="notes", sourceType="documentary")
    assert (doc["sourceType"], doc["authority"]) == ("documentary", "documentary")


async def test_callers_cannot_set_authority(crm: Crm) -> None:
    before = await crm.count()
    error = await crm.error(
        INGEST,
        {"input": {"content": "x", "lane": "notes", "authority": "documentary"}},
        "curator",
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "authority" in error["message"]
    inline = await crm.gateway.error(
        'mutation { ingest(input: {content: "x", lane: "notes", authority: "documentary"}) '
        "{ id } }",
        token=crm.tokens["curator"],
    )
    assert inline["extensions"]["code"] == "BAD_USER_INPUT"
    assert await crm.count() == before


# -- every write path is checked ----------------------------------------------------------


async def test_ingest_many_is_checked_and_all_or_nothing(crm: Crm) -> None:
    before = await crm.count()
    inputs = [
        {"content": "ok", "lane": "crm", "sourceType": "contact", "properties": ["person:Sam"]},
        {"content": "bad", "lane": "crm", "sourceType": "contact", "properties": ["stage:won"]},
    ]
    error = await crm.error(INGEST_MANY, {"inputs": inputs}, "curator")
    extensions = refused(
        error,
        "BAD_USER_INPUT",
        "inputs[1] refused, so nothing was written: "
        "label(s) ['stage'] not allowed for source_type 'contact' in lane 'crm'; "
        "allowed: ['org', 'person', 'title']",
    )
    assert (extensions["index"], extensions["allowed"]) == (1, ["org", "person", "title"])
    assert await crm.count() == before
    written = await crm.data(INGEST_MANY, {"inputs": inputs[:1]}, "curator")
    assert [r["authority"] for r in written["ingestMany"]] == ["documentary"]
    assert await crm.count() == before + 1


async def test_update_is_checked_against_the_records_type(crm: Crm) -> None:
    deal = await crm.ingest(
        "sales", content="Acme", lane="crm", sourceType="deal", properties=["stage:lead"]
    )
    label = await crm.error(UPDATE, {"id": deal["id"], "properties": ["person:Sam"]}, "sales")
    refused(
        label,
        "BAD_USER_INPUT",
        "label(s) ['person'] not allowed for source_type 'deal' in lane 'crm'; "
        "allowed: ['org', 'stage', 'topic']",
    )
    value = await crm.error(UPDATE, {"id": deal["id"], "properties": ["stage:maybe"]}, "sales")
    assert value["message"] == (
        "value 'maybe' not allowed for label 'stage' on source_type 'deal' in lane 'crm'; "
        "allowed values (in order): ['lead', 'proposal', 'won', 'lost']"
    )
    moved = await crm.data(UPDATE, {"id": deal["id"], "properties": ["stage:proposal"]}, "sales")
    assert moved["update"]["properties"] == ["stage:proposal"]
    assert moved["update"]["version"] == 2

    report = await crm.ingest(content=REPORT, lane="crm", sourceType="report")
    bad = await crm.error(UPDATE, {"id": report["id"], "content": "not json"}, "curator")
    assert bad["message"].startswith("content must be JSON for source_type 'report'")
    keys = await crm.error(UPDATE, {"id": report["id"], "content": "{}"}, "curator")
    assert "missing required key(s) ['title']" in keys["message"]
    record = await crm.data(RECORD, {"id": report["id"]}, "curator")
    assert record["record"]["version"] == 1


async def test_add_properties_checks_combined_labels_not_values(crm: Crm) -> None:
    deal = await crm.ingest(content="Acme", lane="crm", sourceType="deal", properties=["org:Acme"])
    # values are not checked by addProperties
    added = await crm.data(ADD, {"id": deal["id"], "properties": ["stage:maybe"]}, "curator")
    assert added["addProperties"]["added"] == ["stage:maybe"]
    assert added["addProperties"]["record"]["properties"] == ["org:Acme", "stage:maybe"]
    # the lane's combined list, not the type's: `person` belongs to contact and meeting
    person = await crm.data(ADD, {"id": deal["id"], "properties": ["person:Sam"]}, "curator")
    assert person["addProperties"]["added"] == ["person:Sam"]
    error = await crm.error(ADD, {"id": deal["id"], "properties": ["budget:1"]}, "curator")
    extensions = refused(
        error,
        "BAD_USER_INPUT",
        "label(s) ['budget'] not allowed in lane 'crm'; "
        "allowed: ['org', 'person', 'stage', 'title', 'topic']",
    )
    assert extensions["allowed"] == ["org", "person", "stage", "title", "topic"]
    reserved = await crm.data(
        ADD, {"id": deal["id"], "properties": ["e_group:x_1", "org:Acme"]}, "curator"
    )
    change = reserved["addProperties"]
    assert (change["added"], change["alreadyHeld"], change["rejected"]) == (
        [],
        ["org:Acme"],
        ["e_group:x_1"],
    )
    record = await crm.data(RECORD, {"id": deal["id"]}, "curator")
    assert record["record"]["version"] == 3


async def test_reserved_labels_are_refused_on_ingest(crm: Crm) -> None:
    error = await crm.error(
        INGEST,
        {"input": {"content": "x", "lane": "notes", "properties": ["e_connect:x"]}},
        "curator",
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"].startswith("label(s) ['e_connect'] are reserved for the engine")


# -- lanes and profiles ---------------------------------------------------------------------


async def test_write_outside_the_profile_is_forbidden(crm: Crm) -> None:
    error = await crm.error(
        INGEST, {"input": {"content": "x", "lane": "crm", "sourceType": "meeting"}}, "planner"
    )
    extensions = refused(
        error, "FORBIDDEN", "agent 'planner' may not write to lane 'crm'; writable lanes: ['notes']"
    )
    assert extensions["allowed"] == ["notes"]
    error = await crm.error(INGEST, {"input": {"content": "x", "lane": "notes"}}, "sales")
    refused(
        error, "FORBIDDEN", "agent 'sales' may not write to lane 'notes'; writable lanes: ['crm']"
    )

    # planner may read crm but not change it, by any write path
    meeting = await crm.ingest(
        "sales", content="Call", lane="crm", sourceType="meeting", properties=["org:Acme"]
    )
    forbidden = "agent 'planner' may not write to lane 'crm'; writable lanes: ['notes']"
    for query, variables in [
        (UPDATE, {"id": meeting["id"], "content": "changed"}),
        (ADD, {"id": meeting["id"], "properties": ["topic:x"]}),
        (
            'mutation($id: ID!) { removeProperties(id: $id, labels: ["org"]) { removed } }',
            {"id": meeting["id"]},
        ),
    ]:
        refused(await crm.error(query, variables, "planner"), "FORBIDDEN", forbidden)
    seen = await crm.data(RECORD, {"id": meeting["id"]}, "planner")
    assert seen["record"]["version"] == 1


async def test_undeclared_lane_takes_no_write(crm: Crm) -> None:
    error = await crm.error(INGEST, {"input": {"content": "x", "lane": "nowhere"}}, "curator")
    extensions = refused(
        error,
        "BAD_USER_INPUT",
        "lane 'nowhere' is not declared by the policy in force; declared lanes: ['crm', 'notes']",
    )
    assert extensions["allowed"] == ["crm", "notes"]
    # without a lane a record goes to 'default', which this policy does not declare
    default = await crm.error(INGEST, {"input": {"content": "x"}}, "curator")
    assert default["message"].startswith("lane 'default' is not declared by the policy in force")


PROFILE = """{ profile { agent readLanes writeLanes canApplyPolicy policyVersion
  lanes { lane readable writable open
          sourceTypes { name authority contentFormat requiredKeys labels { label values } } } } }"""


async def test_profile_lists_writable_lanes_with_types_labels_and_values(crm: Crm) -> None:
    sales = (await crm.data(PROFILE, {}, "sales"))["profile"]
    assert (sales["agent"], sales["readLanes"], sales["writeLanes"]) == ("sales", ["crm"], ["crm"])
    assert sales["canApplyPolicy"] is False
    [lane] = sales["lanes"]
    assert (lane["lane"], lane["writable"], lane["open"]) == ("crm", True, False)
    types = {t["name"]: t for t in lane["sourceTypes"]}
    assert list(types) == ["contact", "deal", "meeting", "report"]
    assert types["deal"]["authority"] == "documentary"
    assert types["deal"]["labels"] == [
        {"label": "org", "values": None},
        {"label": "topic", "values": None},
        {"label": "stage", "values": ["lead", "proposal", "won", "lost"]},
    ]
    assert [r["label"] for r in types["meeting"]["labels"]] == ["person", "org", "topic"]
    assert (types["report"]["contentFormat"], types["report"]["requiredKeys"]) == (
        "json",
        ["title"],
    )

    planner = (await crm.data(PROFILE, {}, "planner"))["profile"]
    assert (planner["readLanes"], planner["writeLanes"]) == (["crm", "notes"], ["notes"])
    lanes = {entry["lane"]: entry for entry in planner["lanes"]}
    assert lanes["crm"]["writable"] is False
    assert lanes["crm"]["sourceTypes"] == []
    assert lanes["notes"]["open"] is True
    assert [(t["name"], t["authority"], t["labels"]) for t in lanes["notes"]["sourceTypes"]] == [
        ("conversational", "conversational", None),
        ("documentary", "documentary", None),
    ]

    curator = (await crm.data(PROFILE, {}, "curator"))["profile"]
    assert (curator["writeLanes"], curator["canApplyPolicy"]) == (["crm", "notes"], True)
