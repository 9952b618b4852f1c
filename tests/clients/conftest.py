"""The Python client (clients/python) against gateways served on threads of their own: its
sync calls block, and a gateway on the suite's own event loop would wait for them."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from gql.server.app import create_app
from gql.server.settings import Settings
from tests.support import REPO, Databases, assert_verified, server_thread

# The client is a distribution of its own; the suite imports it from its folder, as
# `pip install ./clients/python` would.
sys.path.insert(0, str(REPO / "clients" / "python"))

CRM = """
lanes:
  default: {}
  crm:
    source_types:
      deal: { authority: documentary, allowed_labels: [org, stage] }
agents:
  dev: { read: ["*"], write: ["*"] }
  planner: { read: [default], write: [default] }
"""


@dataclass(frozen=True)
class Served:
    """A gateway on a thread: its address and its database."""

    url: str
    database_url: str


async def serve(databases: Databases, **settings: object) -> AsyncIterator[Served]:
    database_url = await databases.create()
    app = create_app(
        Settings(
            database_url=database_url,
            pool_size=4,
            read_pool_size=4,
            **settings,  # type: ignore[arg-type]
        )
    )
    with server_thread(app) as port:
        yield Served(f"http://127.0.0.1:{port}", database_url)
    await assert_verified(database_url)


@pytest.fixture(scope="module")
async def served(databases: Databases) -> AsyncIterator[Served]:
    """A development gateway: lane `default`, the agent `dev` without a token."""
    async for gateway in serve(databases, anonymous_agent="dev"):
        yield gateway


@pytest.fixture(scope="module")
async def served_crm(databases: Databases) -> AsyncIterator[Served]:
    """A gateway with a policy (lanes `default` and `crm`): every call needs a token."""
    async for gateway in serve(databases, policy_yaml=CRM):
        yield gateway
