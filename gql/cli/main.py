"""The `edgeloom` command: its parser (each command's module adds its own) and the dispatch
to serve, mcp, migrate, verify, checkpoint, export, import, intake, search-languages and
the bearer tokens."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

import asyncpg
from sqlalchemy.exc import DBAPIError

from gql.cli import backup, intake, ledger, mcp_command, serve
from gql.cli import tokens as token_commands
from gql.cli.options import data_options
from gql.cli.progress import ProgressBar
from policies.errors import PolicyError
from store.database import create_engine, open_database
from store.errors import StoreError
from store.kinds.policy import in_force as policy_store
from store.kinds.record import words
from store.operations.migrate import migrate
from store.pool import connect


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edgeloom",
        description=(
            "edgeloom: a GraphQL gateway giving AI agents an exact, auditable, shared memory. "
            "Every command uses the PostgreSQL server named by DATABASE_URL "
            "(postgresql://user@host:5432/db) or, when it is unset, an embedded PostgreSQL "
            "kept in --data-dir."
        ),
    )
    data_dir = data_options()
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_parser(commands, data_dir)
    commands.add_parser("migrate", parents=[data_dir], help="apply database migrations and exit")
    ledger.add_verify(commands, data_dir)
    commands.add_parser(
        "search-languages",
        parents=[data_dir],
        help="index each lane's words in the text_search language its policy declares",
        description=(
            "For every lane whose words are indexed in another language than the policy in "
            "force declares, switch to the declared one and rebuild the lane's words in "
            "batches, with progress; searches and writes go on meanwhile."
        ),
    )
    ledger.add_checkpoint(commands, data_dir)
    backup.add_parsers(commands, data_dir)
    mcp_command.add_parser(commands, data_dir)
    intake.add_parser(commands, data_dir)
    token_commands.add_parser(commands, data_dir)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            return serve.run(args)
        if args.command == "mcp":
            return mcp_command.run(args)
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        # Every write is one transaction: what was committed stays whole, the one in
        # flight rolls back, and running the command again completes the rest.
        print(f"edgeloom: {args.command} interrupted; run it again to complete it", file=sys.stderr)
        return 130
    except (PolicyError, StoreError, ValueError) as exc:
        print(f"edgeloom: {exc}", file=sys.stderr)
        return 2
    except (OSError, DBAPIError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        # Status 2, not verify's 1: a database that went away (or was never reachable)
        # says nothing about the ledger.
        print(
            f"edgeloom: cannot use the database: {getattr(exc, 'orig', None) or exc}",
            file=sys.stderr,
        )
        return 2


async def _run(args: argparse.Namespace) -> int:
    database = open_database(args.data_dir)
    engine = create_engine(database.url, pool_size=2)
    try:
        await migrate(engine)
        if args.command == "migrate":
            print(f"migrations applied to {database.description}")
            return 0
        if args.command == "export":
            return await backup.run_export(args, database)
        if args.command == "import":
            return await backup.run_import(args, database)
        if args.command == "checkpoint":
            return await ledger.run_checkpoint(args, database)
        if args.command == "intake":
            return await intake.run(args, database.url)
        if args.command == "search-languages":
            return await _search_languages(database.url)
        if args.command == "verify":
            return await ledger.run_verify(args, database)
        return await token_commands.run(args, engine)
    finally:
        await engine.dispose()


async def _search_languages(url: str) -> int:
    policy = await policy_store.in_force_at(url)
    if policy is None:
        print("no policy applied yet: every lane's words stay in the language they have")
        return 0
    wanted = {name: lane.text_search for name, lane in policy.policy.lanes.items()}
    conn = await connect(url)
    try:
        moved = await words.follow_policy(
            conn, wanted, lambda lane: ProgressBar(f"words of {lane}", unit="rows")
        )
    finally:
        await conn.close()
    for lane, was, now, rows in moved:
        print(f"lane {lane}: words moved from {was} to {now} ({rows} rows rebuilt)")
    if not moved:
        print("every lane's words are in the language its policy declares")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
