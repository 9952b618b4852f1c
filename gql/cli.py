"""The `edgeloom` command: serve, migrate, verify, and bearer tokens."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.exc import DBAPIError

from policies.errors import PolicyError
from policies.loader import is_valid_name, load_policy
from store import policy_store, tokens
from store.database import DEFAULT_DATA_DIR, Database, create_engine, open_database
from store.errors import StoreError
from store.migrate import migrate
from store.policy_store import PolicyCache
from store.verify import verify

DEV_AGENT = "dev"
DEV_POLICY_LOOPBACK_ONLY = (
    "the development policy (no tokens) is served on loopback only; pass --policy FILE "
    "and mint tokens with 'edgeloom token create --agent NAME', or use --host 127.0.0.1"
)
LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
    data_dir = argparse.ArgumentParser(add_help=False)
    data_dir.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"folder of the embedded PostgreSQL, when DATABASE_URL is unset "
        f"(default: {DEFAULT_DATA_DIR})",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        parents=[data_dir],
        help="start the gateway (migrations are applied at start)",
        description=(
            "Start the gateway: GraphQL at /graphql (POST), GraphiQL at /graphql (GET in a "
            "browser), subscriptions over WebSocket on the same path. Without --policy a "
            "development policy is used (lane 'default', agent 'dev', no token needed), and "
            "only on a loopback address."
        ),
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument("--port", type=int, default=4000, help="port to listen on (default 4000)")
    serve.add_argument(
        "--policy", type=Path, help="policy YAML to apply at start (see policies/examples)"
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="gateway processes serving the one port (default 1; about one per core)",
    )

    commands.add_parser("migrate", parents=[data_dir], help="apply database migrations and exit")
    commands.add_parser(
        "verify",
        parents=[data_dir],
        help="check the ledger's hash chains and that projections equal a rebuild",
        description="Exit 0 when ledger and projections agree; 1 listing the differences.",
    )

    token = commands.add_parser("token", help="manage bearer tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = token_commands.add_parser(
        "create",
        parents=[data_dir],
        help="mint a token for an agent; printed once, alone on the last line",
    )
    create.add_argument("--agent", required=True, help="agent name as declared in the policy")
    token_commands.add_parser(
        "list", parents=[data_dir], help="list tokens (ids, agents, state; never the secrets)"
    )
    revoke = token_commands.add_parser(
        "revoke", parents=[data_dir], help="revoke a token by its id (tok_...)"
    )
    revoke.add_argument("id", help="the token id, as 'token list' shows it")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        return asyncio.run(_run(args))
    except (PolicyError, StoreError, ValueError) as exc:
        print(f"edgeloom: {exc}", file=sys.stderr)
        return 2
    except (OSError, DBAPIError) as exc:
        # Status 2, not verify's 1: an unreachable database says nothing about the ledger.
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
        if args.command == "verify":
            report = await verify(engine)
            for problem in report.problems:
                print(problem)
            status = "ok" if report.ok else f"FAILED ({len(report.problems)} problems)"
            print(
                f"verify {status}: {report.records} records, {report.entries} ledger entries, "
                f"{report.memberships} memberships checked in {database.description}"
            )
            return 0 if report.ok else 1
        return await _token(args, engine)
    finally:
        await engine.dispose()


async def _token(args: argparse.Namespace, engine: object) -> int:
    from sqlalchemy.ext.asyncio import AsyncEngine

    assert isinstance(engine, AsyncEngine)
    if args.token_command == "create":
        if not is_valid_name(args.agent):
            print(
                f"edgeloom: agent name {args.agent!r} is not valid; "
                "use lower-case letters, digits and _ (starting with a letter)",
                file=sys.stderr,
            )
            return 2
        in_force = await policy_store.current(engine, PolicyCache.empty())
        if in_force is not None and args.agent not in in_force.policy.agents:
            print(
                f"warning: agent {args.agent!r} is not in policy version {in_force.version} "
                f"(agents: {sorted(in_force.policy.agents)}); the token works once it is",
                file=sys.stderr,
            )
        info, secret = await tokens.create(engine, args.agent)
        print(f"token {info.id} for agent {info.agent} (shown once; store it now):")
        print(secret)
        return 0
    if args.token_command == "list":
        for info in await tokens.list_all(engine):
            state = f"revoked {info.revoked_at.isoformat()}" if info.revoked_at else "active"
            print(f"{info.id}\t{info.agent}\t{info.created_at.isoformat()}\t{state}")
        return 0
    info = await tokens.revoke(engine, args.id)
    print(f"token {info.id} for agent {info.agent} revoked")
    return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gql.app import APP_FACTORY, Settings, create_app, prepare, settings_environment
    from gql.serving import GatheringHttpToolsProtocol

    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    loopback = is_loopback(args.host)
    policy_yaml = None
    if args.policy is not None:
        try:
            policy_yaml = args.policy.read_text(encoding="utf-8")
        except OSError as exc:
            print(
                f"edgeloom: cannot read policy file '{args.policy}': {exc.strerror}",
                file=sys.stderr,
            )
            return 2
        load_policy(policy_yaml, str(args.policy))  # refuse a bad file before anything starts
    if not loopback and policy_yaml is None:
        # Refused before any database is opened: an embedded one would be started for nothing.
        print(
            f"edgeloom: refusing to listen on {args.host}: {DEV_POLICY_LOOPBACK_ONLY}",
            file=sys.stderr,
        )
        return 2
    database = open_database(args.data_dir)
    if not loopback:
        problem = asyncio.run(_exposure_problem(database))
        if problem:
            print(f"edgeloom: refusing to listen on {args.host}: {problem}", file=sys.stderr)
            return 2
    settings = Settings(
        database_url=database.url,
        policy_yaml=policy_yaml,
        policy_source=str(args.policy) if args.policy else "policy",
        anonymous_agent=DEV_AGENT if policy_yaml is None and loopback else None,
    )
    print(f"edgeloom on http://{args.host}:{args.port}/graphql with {database.description}")
    if settings.anonymous_agent:
        print("development mode: requests without a token act as agent 'dev' (loopback only)")
    # One line per request costs more than a small query; keep it for debugging.
    options: dict[str, Any] = dict(
        # One socket write per response (see gql.serving).
        http=GatheringHttpToolsProtocol,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=args.log_level == "debug",
        proxy_headers=False,
    )
    if args.workers > 1:
        # Workers are new processes: each builds the app from the settings in its
        # environment, after this one has migrated and applied the policy once.
        asyncio.run(prepare(settings))
        os.environ.update(settings_environment(settings, args.workers))
        uvicorn.run(APP_FACTORY, factory=True, workers=args.workers, **options)
        return 0
    uvicorn.run(create_app(settings), **options)
    return 0


async def _exposure_problem(database: Database) -> str | None:
    engine = create_engine(database.url, pool_size=1)
    try:
        await migrate(engine)
        if await tokens.active_count(engine) == 0:
            return (
                "no active bearer token exists, so no agent could call it; mint one first with "
                "'edgeloom token create --agent NAME'"
            )
    finally:
        await engine.dispose()
    return None


if __name__ == "__main__":
    raise SystemExit(main())
