"""Whether a gateway started without a policy file serves the policy in force without a
token (`development_lineage`, which `serve` and `mcp --print-config` both ask): the
development policy, and what its agent `dev` applied over it, stay tokenless; a version
another agent applied, or one without `dev`, needs tokens."""

from __future__ import annotations

import asyncio
import time

from gql.server.policy_startup import development_lineage
from tests.conftest import GatewayFactory
from tests.gql._policy_support import mint
from tests.support import StartBudget, sql

APPLY = "mutation ($yaml: String!) { applyPolicy(yaml: $yaml) { version appliedBy } }"
KEEPS_DEV = """
lanes:
  default: {}
agents:
  dev: { read: ["*"], write: ["*"], apply_policy: true }
  curator: { read: ["*"], write: ["*"], apply_policy: true }
"""
WITHOUT_DEV = """
lanes:
  default: {}
agents:
  curator: { read: ["*"], write: ["*"], apply_policy: true }
"""


async def test_what_dev_applies_stays_tokenless_until_another_applier(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(anonymous_agent="dev")

    async def lineage() -> bool:
        async with sql(gateway.database_url) as conn:
            return await development_lineage(conn)

    assert await lineage()  # the development policy
    applied = await gateway.data(APPLY, {"yaml": KEEPS_DEV})
    assert applied["applyPolicy"] == {"version": 2, "appliedBy": "dev"}
    assert await lineage()
    curator = (await mint(gateway, "curator"))["curator"]
    # The policy in force is read through a cache of a short life: curator is declared
    # once the cache has read version 2.
    budget = StartBudget(time.process_time, "version 2 in force for curator")
    while (await gateway.post("{ profile { agent } }", token=curator)).get("errors"):
        budget.check()
        await asyncio.sleep(0.1)
    await gateway.data(APPLY, {"yaml": KEEPS_DEV + "\n"}, curator)
    assert not await lineage()  # another agent applied it: tokens from the next start
    await gateway.data(APPLY, {"yaml": KEEPS_DEV}, token=None)
    assert not await lineage()  # dev over curator's version: still not development's


async def test_a_policy_without_dev_needs_tokens(start_gateway: GatewayFactory) -> None:
    gateway = await start_gateway(anonymous_agent="dev")
    await gateway.data(APPLY, {"yaml": WITHOUT_DEV})
    async with sql(gateway.database_url) as conn:
        assert not await development_lineage(conn)
