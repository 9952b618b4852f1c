"""A gateway whose development agent reads and writes two lanes, and a plain connection
to its database: for store tests that write through the write path and read below it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from asyncpg import Connection

from tests.conftest import GatewayFactory
from tests.support import Gateway, sql

# The language these lanes' tests were written for: every word as written, none stemmed.
POLICY = """
lanes:
  notes: { text_search: simple }
  secret: { text_search: simple }
agents:
  dev: { read: [notes, secret], write: [notes, secret] }
"""
BOTH = ["notes", "secret"]


def gateway_under(policy: str) -> Any:
    """A module's gateway fixture: the development agent under `policy`."""

    @pytest.fixture(scope="module")
    async def gateway(start_gateway: GatewayFactory) -> Gateway:
        return await start_gateway(policy_yaml=policy, anonymous_agent="dev")

    return gateway


gateway = gateway_under(POLICY)


@pytest.fixture
async def conn(gateway: Gateway) -> AsyncIterator[Connection]:
    async with sql(gateway.database_url) as connection:
        yield connection
