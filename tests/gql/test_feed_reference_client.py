"""The feed with the reference client: graphql-ws's createClient from Node, over `ws`."""

from __future__ import annotations

import asyncio
import json

from tests.conftest import GatewayFactory
from tests.gql._feed import newest_cursor
from tests.gql._node import node_or_skip
from tests.gql._policy_support import mint
from tests.support import REPO

CLIENT = REPO / "tests" / "js"
TIMEOUT = 60


async def run(*args: str, cwd: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *args, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def installed() -> str:
    """graphql-ws and ws from npm, into the client's own folder (once); node's path."""
    node, npm = node_or_skip("the reference client runs on Node")
    if (CLIENT / "node_modules" / "graphql-ws").is_dir():
        return node
    code, out, err = await run(npm, "install", "--no-audit", "--no-fund", cwd=str(CLIENT))
    assert code == 0, out + err
    return node


async def test_the_graphql_ws_client_receives_events(
    start_gateway: GatewayFactory, crm_yaml: str
) -> None:
    node = await installed()
    gateway = await start_gateway(policy_yaml=crm_yaml)
    planner = (await mint(gateway, "planner"))["planner"]
    start = await newest_cursor(gateway)
    client = asyncio.create_task(
        run(node, "subscribe.mjs", gateway.ws_url, start, "2", planner, cwd=str(CLIENT))
    )
    written = []
    for content in ("first for node", "second for node"):
        body = await gateway.data(
            'mutation($c: String!) { ingest(input: {content: $c, lane: "notes"}) { id } }',
            {"c": content},
            planner,
        )
        written.append(body["ingest"]["id"])
    code, out, err = await client
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["recordId"] for e in events] == written
    assert [e["kind"] for e in events] == ["sr_ingested", "sr_ingested"]
    assert all(e["lane"] == "notes" and e["actor"] == "planner" for e in events)
    assert int(events[0]["cursor"]) > int(start)
