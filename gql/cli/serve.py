"""`edgeloom serve`: start the gateway, after migrating, settling the policy and refusing
what no agent could use."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gql.api.observe import DEFAULT_EVERY
from gql.cli.options import DEV_AGENT, NEW_KEY_HELP, Commands, key_path
from gql.server.hosts import ALLOWED_HOSTS_VARIABLE, allowed_hosts, is_loopback
from gql.server.listen import listen_problem
from policies.loader import DEV_POLICY_YAML, load_policy
from store.database import Database, create_engine, open_database
from store.kinds.policy.in_force import PolicyCache, PolicyVersion
from store.ledger.executor import Executor
from store.operations import checkpoints, tokens
from store.operations.migrate import migrate
from store.pool import create_pool
from store.printable import printable
from store.reads.replicas import ReplicaOptions, read_urls

if TYPE_CHECKING:
    from gql.server.settings import Settings

DEV_POLICY_LOOPBACK_ONLY = (
    "the development policy (no tokens) is served on loopback only; pass --policy FILE "
    "and mint tokens with 'edgeloom token create --agent NAME', or use --host 127.0.0.1"
)
READ_POOL_VARIABLE = "EDGELOOM_READ_POOL_SIZE"
ENGINE_POOL_VARIABLE = "EDGELOOM_ENGINE_POOL_SIZE"
# `serve` options named as the Settings fields they set.
SOCKET_OPTIONS = (
    "max_ws_connections",
    "max_ws_unauthenticated",
    "max_ws_unauthenticated_per_address",
    "ws_init_timeout",
)


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return number


def _from_environment(variable: str) -> int | None:
    """A pool size from the environment; None when unset. A bad value is refused like a bad
    option, naming the variable."""
    text = os.environ.get(variable)
    if not text:
        return None
    try:
        return _positive(text)
    except argparse.ArgumentTypeError as exc:
        raise SystemExit(f"edgeloom: {variable}: {exc}") from None


def add_parser(commands: Commands, data_dir: argparse.ArgumentParser) -> None:
    """The `serve` command and its options."""
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
    chosen = serve.add_mutually_exclusive_group()
    chosen.add_argument(
        "--policy", type=Path, help="policy YAML to apply at start (see policies/examples)"
    )
    chosen.add_argument(
        "--dev-policy",
        action="store_true",
        help="apply the development policy again (as a new version) and serve it without "
        "tokens; loopback only",
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    # Unset, from the environment (a container's settings), else the Settings defaults.
    serve.add_argument(
        "--read-pool-size",
        type=_positive,
        default=_from_environment(READ_POOL_VARIABLE),
        metavar="N",
        help="connections each gateway process opens at start for its reads and writes "
        f"(default 20; also {READ_POOL_VARIABLE}); size it with --workers and the server's "
        "max_connections in mind",
    )
    serve.add_argument(
        "--engine-pool-size",
        type=_positive,
        default=_from_environment(ENGINE_POOL_VARIABLE),
        metavar="N",
        help="connections each process may open for tokens and the feed's catch-up reads "
        f"(default 10; also {ENGINE_POOL_VARIABLE})",
    )
    serve.add_argument(
        "--request-log-every",
        type=int,
        default=DEFAULT_EVERY,
        metavar="N",
        help=f"at --log-level info or debug, the request log's line of one in N requests "
        f"answered without error in under a second (default {DEFAULT_EVERY}; 1: every "
        "request); failed and slow requests are always logged",
    )
    serve.add_argument(
        "--ws-compression",
        action="store_true",
        help="offer permessage-deflate on WebSocket connections (off by default: feed events "
        "are small, and compressing each frame costs more CPU than it saves on a fast network)",
    )
    serve.add_argument("--new-checkpoint-key", action="store_true", help=NEW_KEY_HELP)
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients and pages address the gateway by, besides the one it listens "
        "on, loopback names and IP addresses (repeatable; also "
        f"{ALLOWED_HOSTS_VARIABLE}=NAME,NAME); requests for other names are refused (DNS "
        "rebinding)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="gateway processes serving the one port (default 1; about one per core)",
    )
    # Unset, they keep the defaults of gql.server.settings.Settings.
    serve.add_argument(
        "--max-ws-connections",
        type=int,
        help="WebSocket connections each gateway process holds at once (default 16384)",
    )
    serve.add_argument(
        "--max-ws-unauthenticated",
        type=int,
        help="WebSocket connections each process holds before their connection_init is "
        "acknowledged (default 1024)",
    )
    serve.add_argument(
        "--max-ws-unauthenticated-per-address",
        type=int,
        help="the same, from one client address (default 256)",
    )
    serve.add_argument(
        "--ws-init-timeout",
        type=float,
        help="seconds a WebSocket may take to send connection_init (default 10)",
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from gql.server.app import create_app
    from gql.server.serving import server_options
    from gql.server.settings import Settings
    from gql.server.workers import APP_FACTORY, settings_environment

    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    # Before anything starts: migrations and the embedded server would be started for nothing.
    problem = listen_problem(args.host, args.port)
    if problem is not None:
        print(f"edgeloom: {problem}", file=sys.stderr)
        return 2
    loopback = is_loopback(args.host)
    policy_yaml = None
    if args.policy is not None:
        try:
            policy_yaml = args.policy.read_text(encoding="utf-8")
        except OSError as exc:
            print(
                f"edgeloom: cannot read policy file '{printable(args.policy)}': {exc.strerror}",
                file=sys.stderr,
            )
            return 2
        load_policy(policy_yaml, str(args.policy))  # refuse a bad file before anything starts
    elif args.dev_policy:
        policy_yaml = DEV_POLICY_YAML
    if not loopback and args.policy is None:
        # Refused before any database is opened: an embedded one would be started for nothing.
        print(
            f"edgeloom: refusing to listen on {args.host}: {DEV_POLICY_LOOPBACK_ONLY}",
            file=sys.stderr,
        )
        return 2
    database = open_database(args.data_dir)
    settings = Settings(
        database_url=database.url,
        policy_yaml=policy_yaml,
        policy_source=str(args.policy) if args.policy else "development policy",
        # Only a development gateway applies the development policy when none is in force.
        anonymous_agent=DEV_AGENT if args.policy is None else None,
        runtime_database_url=os.environ.get("EDGELOOM_RUNTIME_DATABASE_URL") or None,
        replicas=ReplicaOptions(urls=read_urls(os.environ.get("EDGELOOM_READ_URLS"))),
        checkpoint_key=key_path(args),
        new_checkpoint_key=args.new_checkpoint_key,
        request_log=args.log_level in ("debug", "info"),
        request_log_every=args.request_log_every,
        allowed_hosts=(
            args.host,
            *args.allowed_host,
            *allowed_hosts(os.environ.get(ALLOWED_HOSTS_VARIABLE)),
        ),
        **{name: getattr(args, name) for name in SOCKET_OPTIONS if getattr(args, name) is not None},
        **({"read_pool_size": args.read_pool_size} if args.read_pool_size else {}),
        **({"pool_size": args.engine_pool_size} if args.engine_pool_size else {}),
    )
    problem, in_force, lineage = asyncio.run(_start(database, settings, exposed=not loopback))
    if problem:
        print(f"edgeloom: refusing to listen on {args.host}: {problem}", file=sys.stderr)
        return 2
    # A key taken over at start signed a checkpoint then: the app (each worker) finds it.
    settings = replace(settings, new_checkpoint_key=False)
    development = args.policy is None and in_force is not None and lineage
    settings = replace(settings, anonymous_agent=DEV_AGENT if development else None)
    print(f"edgeloom on http://{args.host}:{args.port}/graphql with {database.description}")
    if settings.replicas.urls:
        print(f"reads on {len(settings.replicas.urls)} standby(s) (EDGELOOM_READ_URLS)")
    if in_force is not None:
        print(_policy_line(in_force, args.policy, policy_yaml))
    if development:
        print("development mode: requests without a token act as agent 'dev' (loopback only)")
    elif in_force is not None and args.policy is None:
        print(
            f"policy version {in_force.version} is not the development policy, nor one its "
            "agent 'dev' applied over it, so every call "
            f"needs a bearer token for an agent it declares ({_agents(in_force)}): mint one "
            "with 'edgeloom token create --agent NAME', or start with --dev-policy to apply the "
            "development policy again as a new version"
        )
    sys.stdout.flush()  # before uvicorn's own lines, and visible when stdout is a file
    options: dict[str, Any] = dict(
        **server_options(ws_compression=args.ws_compression),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        # One line per request costs more than a small query; keep it for debugging.
        access_log=args.log_level == "debug",
        proxy_headers=False,
        # uvicorn refuses a larger WebSocket message (1009) before buffering all of it.
        ws_max_size=settings.max_body_bytes,
    )
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if args.workers > 1:
            # Workers are new processes: each builds the app from the settings in its
            # environment; this one has migrated and applied the policy once (_start).
            os.environ.update(settings_environment(settings, args.workers))
            with metrics_files():
                uvicorn.run(APP_FACTORY, factory=True, workers=args.workers, **options)
        else:
            uvicorn.run(create_app(settings), **options)
    except _Stopped:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


@contextmanager
def metrics_files() -> Iterator[None]:
    """A fresh folder where the workers keep their metrics (prometheus-client's
    multiprocess mode), removed at the end; one an operator names in
    PROMETHEUS_MULTIPROC_DIR is used as it is, and kept."""
    from gql.server.metrics import MULTIPROCESS_DIR

    if os.environ.get(MULTIPROCESS_DIR):
        yield
        return
    folder = tempfile.mkdtemp(prefix="edgeloom-metrics-")
    os.environ[MULTIPROCESS_DIR] = folder
    try:
        yield
    finally:
        del os.environ[MULTIPROCESS_DIR]
        shutil.rmtree(folder, ignore_errors=True)


class _Stopped(Exception):
    """SIGTERM or SIGINT, after uvicorn has shut down gracefully."""


def _stop(signum: int, frame: object) -> None:
    # uvicorn shuts down on the signal, then raises it again for this handler. Without
    # one, SIGTERM would end the process on the spot, skipping the exit handlers that
    # stop the embedded PostgreSQL when this is the last process using it.
    raise _Stopped(signum)


async def _start(
    database: Database, settings: Settings, exposed: bool
) -> tuple[str | None, PolicyVersion | None, bool]:
    """Migrate, refuse an exposed gateway no agent could call, and settle the policy; the
    policy in force, and whether it is served without a token when no policy file is given
    (`development_lineage`)."""
    from gql.server.policy_startup import development_lineage, ensure_policy

    engine = create_engine(database.url, pool_size=1)
    try:
        await migrate(engine)
        if exposed and await tokens.active_count(engine) == 0:
            problem = (
                "no active bearer token exists, so no agent could call it; mint one first with "
                "'edgeloom token create --agent NAME'"
            )
            return problem, None, False
        pool = await create_pool(database.url, 1)
        try:
            if settings.checkpoint_key is not None:
                async with pool.acquire() as conn:
                    await checkpoints.open_key(
                        conn, settings.checkpoint_key, database.url, settings.new_checkpoint_key
                    )
            in_force = await ensure_policy(Executor(pool, PolicyCache.empty()), settings)
            async with pool.acquire() as conn:
                return None, in_force, await development_lineage(conn)
        finally:
            await pool.close()
    finally:
        await engine.dispose()


def _policy_line(in_force: PolicyVersion, path: Path | None, given: str | None) -> str:
    if in_force.yaml == DEV_POLICY_YAML:
        origin = "the development policy"
    elif path is not None and in_force.yaml == given:
        origin = f"from {printable(path)}"
    else:
        origin = "applied earlier, by applyPolicy or serve --policy"
    at = in_force.applied_at.strftime("%Y-%m-%d %H:%M:%S %Z")
    return (
        f"policy version {in_force.version} in force ({origin}), "
        f"applied by {in_force.applied_by} at {at}"
    )


def _agents(in_force: PolicyVersion) -> str:
    return ", ".join(sorted(in_force.policy.agents)) or "none"
