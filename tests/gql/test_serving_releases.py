"""On uvicorn or websockets releases newer than those the gateway's own server protocols
were tested on, it serves with uvicorn's protocols, and the feed sends the ordinary way."""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from importlib.metadata import version

import pytest

from gql.feed.hub import FeedHub
from gql.server import serving
from tests.conftest import DEV, GatewayFactory
from tests.gql._api import ingest, unique
from tests.gql._feed import FeedClient, feed_client

MEMBERS = 3


def test_release_reads_major_and_minor() -> None:
    assert serving.release("0.55.0") == (0, 55)
    assert serving.release("17.4") == (17, 4)
    assert serving.release("18") == (18, 0)
    assert serving.release("0.56.0rc1") == (0, 56)
    with pytest.raises(ValueError, match="not a version"):
        serving.release("main")


def test_the_installed_releases_are_tested_ones() -> None:
    """The suite runs the gateway's own protocols: on releases newer than those named
    in `NEWEST_TESTED`, raise it once the suite passes on them."""
    assert serving.untested_releases() == []


def test_a_newer_release_is_untested(monkeypatch: pytest.MonkeyPatch) -> None:
    older = serving.release(version("uvicorn"))
    monkeypatch.setitem(serving.NEWEST_TESTED, "uvicorn", (older[0], older[1] - 1))
    assert serving.untested_releases() == [f"uvicorn {version('uvicorn')}"]
    options = serving.server_options()
    assert (options["http"], options["ws"]) == ("httptools", "websockets-sansio")


async def test_members_get_every_message_through_uvicorns_own_protocols(
    start_gateway: GatewayFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Members of one group on a gateway serving uvicorn's protocols: no frame is written
    below them (each member's socket is not one the feed writes to), and each member
    gets every message, the same bytes as the others."""
    monkeypatch.setitem(serving.NEWEST_TESTED, "websockets", (0, 0))
    with caplog.at_level(logging.WARNING, logger="gql.server.serving"):
        gateway = await start_gateway(anonymous_agent=DEV)
    assert f"websockets {version('websockets')}: newer than the releases" in caplog.text
    assert gateway.state is not None
    hub: FeedHub = gateway.state["services"].feed
    topic = unique("topic:untested-")
    async with AsyncExitStack() as stack:
        clients: list[FeedClient] = []
        for _ in range(MEMBERS):
            client = await stack.enter_async_context(feed_client(gateway))
            await client.subscribe("1", kinds=["sr_ingested"])
            clients.append(client)
        # Subscribing takes a moment: live once a probe reaches every member.
        for _ in range(40):
            probe = await ingest(gateway, "probe", [topic])
            try:
                for client in clients:
                    while (await client.event("1", timeout=1))["recordId"] != probe["id"]:
                        pass
                break
            except TimeoutError:
                continue
        subscribers = [s for s in hub._subscribers if s.direct is not None]
        assert len(subscribers) == MEMBERS
        assert all(s.direct is not None and s.direct.raw is None for s in subscribers)
        one = await ingest(gateway, "one", [topic])
        two = await ingest(gateway, "two", [topic])
        got = [await client.events("1", 2) for client in clients]
    assert [e["recordId"] for e in got[0]] == [one["id"], two["id"]]
    assert all(events == got[0] for events in got)
    assert hub.group_writes == 0
