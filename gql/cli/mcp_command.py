"""`edgeloom mcp`: the MCP tools over stdio, or the client configuration that names them."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys

from gql.cli.options import Commands
from store.database import open_database


def add_parser(commands: Commands, data_dir: argparse.ArgumentParser) -> None:
    """The `mcp` command and its options."""
    mcp = commands.add_parser(
        "mcp",
        parents=[data_dir],
        help="serve the MCP tools over stdio (the gateway serves them over HTTP at /mcp)",
        description=(
            "Serve the MCP tools over stdio as the agent the bearer token names: every call "
            "goes through the same guard, ledger and audit events as GraphQL. Without a "
            "token, only while a gateway started without a policy file serves calls without one "
            "(as agent 'dev'): the development policy, or one its agent 'dev' applied over it."
        ),
    )
    mcp.add_argument(
        "--token", help="bearer token of the agent to act as (default: EDGELOOM_TOKEN)"
    )
    mcp.add_argument(
        "--print-config",
        action="store_true",
        help="print an mcpServers entry for this command (stdio) and one for a gateway's "
        "/mcp endpoint (HTTP), then exit: with the token given, with none while a gateway "
        "started without a policy file serves calls without one, else with a placeholder "
        "to replace",
    )
    mcp.add_argument(
        "--url",
        default="http://127.0.0.1:4000",
        help="the gateway --print-config names for HTTP (default http://127.0.0.1:4000)",
    )


def run(args: argparse.Namespace) -> int:
    from gql.cli.mcp_config import development_mode, print_config
    from gql.cli.mcp_stdio import serve_stdio

    token = args.token or os.environ.get("EDGELOOM_TOKEN") or None
    logging.basicConfig(level="WARNING", format="%(levelname)s %(name)s: %(message)s")
    if args.print_config and token is not None:
        print_config(token, args.url, args.data_dir, development=False)
        return 0
    with contextlib.redirect_stdout(sys.stderr):
        # The embedded server's start-up must not write to stdout, the protocol's channel.
        database = open_database(args.data_dir)
    if args.print_config:
        # Without a token, the mode of the memory's gateway decides what works as printed.
        print_config(None, args.url, args.data_dir, asyncio.run(development_mode(database.url)))
        return 0
    runtime = os.environ.get("EDGELOOM_RUNTIME_DATABASE_URL") or None
    asyncio.run(serve_stdio(database.url, token, runtime))
    return 0
