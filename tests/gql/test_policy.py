"""Policies over the API: the one in force, applying new versions, and the safe default."""

from __future__ import annotations

import logging
import time
from datetime import datetime

import pytest

from store.kinds.policy import in_force as policy_store
from tests.conftest import GatewayFactory
from tests.gql._policy_support import APPLY, INGEST, POLICY, RECORD, UPDATE, ingest, mint
from tests.support import Gateway, sql

MEMOS = """
  memos:
    source_types:
      memo: { allowed_labels: [topic] }
"""


def with_memos(crm_yaml: str) -> str:
    """The crm policy plus a closed lane `memos` whose one type names no authority."""
    return crm_yaml.replace("lanes:\n", "lanes:" + MEMOS, 1)


async def history(gateway: Gateway) -> list[tuple[int, datetime, str]]:
    async with sql(gateway.database_url) as conn:
        return await policy_store.history(conn)


async def test_the_policy_given_at_start_is_in_force(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(policy_yaml=crm_yaml)
    tokens = await mint(gateway, "planner")
    policy = (await gateway.data(POLICY, token=tokens["planner"]))["policy"]
    assert (policy["version"], policy["appliedBy"], policy["yaml"]) == (1, "operator", crm_yaml)
    assert datetime.fromisoformat(policy["appliedAt"]).tzinfo is not None


async def test_apply_policy_makes_a_new_version_in_the_policy_ledger(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(policy_yaml=crm_yaml)
    tokens = await mint(gateway, "curator", "sales")
    curator = tokens["curator"]
    deal = await ingest(
        gateway, curator, content="Acme", lane="crm", sourceType="deal", properties=["org:Acme"]
    )

    changed = with_memos(crm_yaml)
    applied = (await gateway.data(APPLY, {"yaml": changed}, curator))["applyPolicy"]
    assert (applied["version"], applied["appliedBy"], applied["yaml"]) == (2, "curator", changed)
    assert (await gateway.data(POLICY, token=tokens["sales"]))["policy"] == applied

    kept = await history(gateway)
    assert [(v, by) for v, _, by in kept] == [(1, "operator"), (2, "curator")]
    assert kept[1][1] == datetime.fromisoformat(applied["appliedAt"])
    assert kept[0][1] < kept[1][1]
    events = await gateway.data(
        '{ audit(kinds: ["policy_applied"]) { items { actor payload } } }', token=curator
    )
    assert [e["actor"] for e in events["audit"]["items"]] == ["operator", "curator"]
    assert events["audit"]["items"][1]["payload"]["version"] == 2

    # the same text again changes nothing
    again = (await gateway.data(APPLY, {"yaml": changed}, curator))["applyPolicy"]
    assert again == applied
    assert len(await history(gateway)) == 2

    # every ledger entry names the policy it was written under
    await gateway.data(UPDATE, {"id": deal["id"], "properties": ["topic:renewal"]}, curator)
    record = (await gateway.data(RECORD, {"id": deal["id"]}, curator))["record"]
    assert record["versions"] == [
        {"number": 1, "policyVersion": 1},
        {"number": 2, "policyVersion": 2},
    ]

    # the new version is what writes are checked against, at once
    memo = await ingest(
        gateway, curator, content="note", lane="memos", sourceType="memo", properties=["topic:x"]
    )
    assert (memo["sourceType"], memo["authority"]) == ("memo", "conversational")
    profile = await gateway.data("{ profile { policyVersion writeLanes } }", token=curator)
    assert profile["profile"] == {"policyVersion": 2, "writeLanes": ["crm", "memos", "notes"]}


async def test_apply_policy_needs_apply_policy(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(policy_yaml=crm_yaml)
    tokens = await mint(gateway, "sales", "planner")
    for agent in ("sales", "planner"):
        error = await gateway.error(APPLY, {"yaml": with_memos(crm_yaml)}, tokens[agent])
        assert error["message"] == (
            f"agent {agent!r} may not apply a policy; agents with apply_policy: ['curator']"
        )
        assert error["extensions"]["code"] == "FORBIDDEN"
        assert error["extensions"]["allowed"] == ["curator"]
        # a caller who may not apply a policy learns nothing from having it checked
        invalid = await gateway.error(APPLY, {"yaml": "lanes: {}"}, tokens[agent])
        assert invalid["extensions"]["code"] == "FORBIDDEN", invalid
    no_token = await gateway.error(APPLY, {"yaml": with_memos(crm_yaml)})
    assert no_token["extensions"]["code"] == "UNAUTHENTICATED"
    policy = await gateway.data(POLICY, token=tokens["sales"])
    assert policy["policy"]["version"] == 1
    assert len(await history(gateway)) == 1


async def test_a_bad_policy_is_refused_naming_the_key_and_what_is_allowed(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(policy_yaml=crm_yaml)
    curator = (await mint(gateway, "curator"))["curator"]

    unknown_key = crm_yaml.replace("report:\n", "report:\n        colour: red\n", 1)
    error = await gateway.error(APPLY, {"yaml": unknown_key}, curator)
    allowed = ["allowed_labels", "authority", "content_format", "enabled", "required_keys"]
    assert error["message"] == (
        "policy 'applyPolicy': key 'lanes.crm.source_types.report': "
        f"unknown key 'colour'; allowed keys: {allowed}"
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["extensions"]["key"] == "lanes.crm.source_types.report"
    assert error["extensions"]["allowed"] == allowed

    undeclared = crm_yaml.replace("read: [crm, notes]", "read: [crm, archive]", 1)
    error = await gateway.error(APPLY, {"yaml": undeclared}, curator)
    assert error["message"] == (
        "policy 'applyPolicy': key 'agents.planner.read[1]': "
        "'archive' is not a declared lane; allowed: ['*', 'crm', 'notes']"
    )
    assert error["extensions"]["allowed"] == ["*", "crm", "notes"]

    error = await gateway.error(APPLY, {"yaml": "lanes: [notes"}, curator)
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"].startswith("policy 'applyPolicy': not valid YAML (")

    # YAML 1.1 would read this as a date and fail inside the parser
    dated = crm_yaml.replace("apply_policy: true", "apply_policy: 2026-13-01", 1)
    assert dated != crm_yaml
    error = await gateway.error(APPLY, {"yaml": dated}, curator)
    assert error["extensions"]["code"] == "BAD_USER_INPUT", error
    assert error["extensions"]["key"] == "agents.curator.apply_policy"
    assert "must be true or false; got a string '2026-13-01'" in error["message"]

    policy = (await gateway.data(POLICY, token=curator))["policy"]
    assert (policy["version"], policy["yaml"]) == (1, crm_yaml)


async def test_a_lane_the_policy_no_longer_declares_takes_no_write(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    gateway = await start_gateway(policy_yaml=with_memos(crm_yaml))
    curator = (await mint(gateway, "curator"))["curator"]
    await ingest(gateway, curator, content="old", lane="memos", sourceType="memo")
    await gateway.data(APPLY, {"yaml": crm_yaml}, curator)
    error = await gateway.error(
        INGEST, {"input": {"content": "new", "lane": "memos", "sourceType": "memo"}}, curator
    )
    assert error["message"] == (
        "lane 'memos' is not declared by the policy in force; declared lanes: ['crm', 'notes']"
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"


async def test_without_a_policy_the_dev_policy_serves_loopback(gateway: Gateway) -> None:
    profile = await gateway.data("{ profile { agent readLanes writeLanes canApplyPolicy } }")
    assert profile["profile"] == {
        "agent": "dev",
        "readLanes": ["default"],
        "writeLanes": ["default"],
        "canApplyPolicy": True,
    }
    policy = (await gateway.data(POLICY))["policy"]
    assert policy["appliedBy"] == "operator:development-default"
    assert "default: {}" in policy["yaml"]
    record = (await gateway.data(INGEST, {"input": {"content": "hello"}}))["ingest"]
    assert (record["lane"], record["sourceType"], record["authority"]) == (
        "default",
        "conversational",
        "conversational",
    )


MOVABLE = """
lanes:
  alpha: {}
  beta: {}
agents:
  a: { read: [alpha], write: [alpha] }
  boss: { read: ["*"], write: ["*"], apply_policy: true }
"""


async def test_an_idempotent_retry_does_not_reach_a_lane_no_longer_granted(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(policy_yaml=MOVABLE)
    minted = await mint(gateway, "a", "boss")
    first = await ingest(gateway, minted["a"], content="secret", lane="alpha", idempotencyKey="k1")
    moved = MOVABLE.replace(
        "a: { read: [alpha], write: [alpha] }", "a: { read: [beta], write: [beta] }"
    )
    await gateway.data(APPLY, {"yaml": moved}, minted["boss"])
    for lane in ("alpha", "beta"):
        error = await gateway.error(
            INGEST,
            {"input": {"content": "secret", "lane": lane, "idempotencyKey": "k1"}},
            minted["a"],
        )
        assert error["message"] == (
            "agent 'a' may not write to lane 'alpha'; writable lanes: ['beta']"
        ), error
        assert error["extensions"]["code"] == "FORBIDDEN"
        assert first["id"] not in str(error)


async def test_restarting_with_the_policy_file_replaces_an_applied_one_and_says_so(
    start_gateway: GatewayFactory, crm_yaml: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = await start_gateway(policy_yaml=crm_yaml)
    curator = (await mint(first, "curator"))["curator"]
    await first.data(APPLY, {"yaml": with_memos(crm_yaml)}, curator)

    with caplog.at_level(logging.WARNING, logger="edgeloom"):
        second = await start_gateway(policy_yaml=crm_yaml, database_url=first.database_url)
    policy = (await second.data(POLICY, token=curator))["policy"]
    assert (policy["version"], policy["appliedBy"], policy["yaml"]) == (3, "operator", crm_yaml)
    assert any("replaces version 2 (applied by curator" in r.getMessage() for r in caplog.records)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="edgeloom"):
        third = await start_gateway(policy_yaml=crm_yaml, database_url=first.database_url)
    assert (await third.data(POLICY, token=curator))["policy"]["version"] == 3
    assert not [r for r in caplog.records if "replaces version" in r.getMessage()]


async def test_an_alias_bomb_is_refused_at_once_and_health_keeps_answering(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    """987 bytes of nested aliases (10^8 strings) held the event loop for seconds."""
    gateway = await start_gateway(policy_yaml=crm_yaml)
    curator = (await mint(gateway, "curator"))["curator"]
    levels = [f"&a0 [{', '.join(['lol'] * 10)}]"]
    levels += [f"&a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 8)]
    bomb = f"lanes: {{crm: {{}}}}\nagents:\n  a:\n   apply_policy: [{', '.join(levels)}]\n"
    started = time.monotonic()
    error = await gateway.error(APPLY, {"yaml": bomb}, curator)
    assert time.monotonic() - started < 1.0
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"].startswith("policy 'applyPolicy': not valid YAML (aliases may add")
    assert (await gateway.client.get(gateway.url + "/healthz")).status_code == 200
    assert len(await history(gateway)) == 1
