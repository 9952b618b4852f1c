"""The `edgeloom` command: serve, mcp, migrate, verify, intake, and bearer tokens."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
from sqlalchemy.exc import DBAPIError

from gql.api.observe import DEFAULT_EVERY
from gql.cli import tokens as token_commands
from gql.cli.progress import ProgressBar
from gql.server.hosts import ALLOWED_HOSTS_VARIABLE, allowed_hosts, is_loopback
from gql.server.listen import listen_problem
from policies.errors import PolicyError
from policies.loader import DEV_POLICY_YAML, load_policy
from store.database import DEFAULT_DATA_DIR, Database, create_engine, open_database
from store.errors import StoreError
from store.intake.run import Intake
from store.intake.sources import FolderSource
from store.kinds.policy import in_force as policy_store
from store.kinds.policy.in_force import PolicyCache, PolicyVersion
from store.kinds.record import words
from store.ledger.executor import Executor
from store.operations import checkpoints, signing, tokens
from store.operations.export import export
from store.operations.migrate import migrate
from store.operations.restore import import_
from store.operations.verify import verify
from store.pool import connect, create_pool
from store.printable import printable
from store.reads.replicas import ReplicaOptions, read_urls
from store.reads.snapshot import Snapshot

if TYPE_CHECKING:
    from gql.server.settings import Settings

DEV_AGENT = "dev"
NEW_KEY_HELP = (
    "sign with the checkpoint key given (made if missing) although this memory's newest "
    "checkpoints were signed by another key; refused without it"
)
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
    data_dir.add_argument(
        "--checkpoint-key",
        type=Path,
        default=None,
        help="Ed25519 key (PEM) that signs checkpoints, kept outside the database; created "
        "at first use (default: EDGELOOM_CHECKPOINT_KEY, else checkpoint-key.pem beside the "
        "data folder)",
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

    commands.add_parser("migrate", parents=[data_dir], help="apply database migrations and exit")
    commands.add_parser(
        "verify",
        parents=[data_dir],
        help="check the ledger's hash chains and that projections equal a rebuild",
        description="Exit 0 when ledger and projections agree; 1 listing the differences.",
    )

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

    anchor = commands.add_parser(
        "checkpoint",
        parents=[data_dir],
        help="anchor every settled ledger entry in a new checkpoint now",
        description=(
            "Append a checkpoint covering every ledger entry committed since the last one; "
            "verify then detects erased or rewritten history before it. The gateway also "
            "takes one every minute while it runs."
        ),
    )
    anchor.add_argument("--new-checkpoint-key", action="store_true", help=NEW_KEY_HELP)

    export = commands.add_parser(
        "export",
        parents=[data_dir],
        help="write the whole memory to a file (gzip JSON Lines), consistent while writers run",
    )
    export.add_argument("file", type=Path, help="where to write, e.g. memory.jsonl.gz")
    restore = commands.add_parser(
        "import",
        parents=[data_dir],
        help="fill an empty database from an export; verify passes afterwards",
    )
    restore.add_argument("file", type=Path, help="a file written by 'edgeloom export'")

    mcp = commands.add_parser(
        "mcp",
        parents=[data_dir],
        help="serve the MCP tools over stdio (the gateway serves them over HTTP at /mcp)",
        description=(
            "Serve the MCP tools over stdio as the agent the bearer token names: every call "
            "goes through the same guard, ledger and audit events as GraphQL. Without a "
            "token, only while the development policy is in force (as agent 'dev')."
        ),
    )
    mcp.add_argument(
        "--token", help="bearer token of the agent to act as (default: EDGELOOM_TOKEN)"
    )
    mcp.add_argument(
        "--print-config",
        action="store_true",
        help="print an mcpServers entry for this command (stdio) and one for a gateway's "
        "/mcp endpoint (HTTP), then exit: with the token given, with none while the "
        "development policy is in force, else with a placeholder to replace",
    )
    mcp.add_argument(
        "--url",
        default="http://127.0.0.1:4000",
        help="the gateway --print-config names for HTTP (default http://127.0.0.1:4000)",
    )

    intake = commands.add_parser(
        "intake",
        parents=[data_dir],
        help="build or refresh memory from a folder of notes",
        description=(
            "One record for the folder, one per file and one per part of a file, with the "
            "links the files state and their layout implies as detected edges. A re-run "
            "writes only what changed. Runs as --agent under the policy in force."
        ),
    )
    intake.add_argument("path", type=Path, help="the folder")
    intake.add_argument("--lane", required=True, help="the lane to write in")
    intake.add_argument(
        "--dry-run", action="store_true", help="write nothing; print what would be written"
    )
    intake.add_argument(
        "--folder",
        default=None,
        help="the folder's name in memory, which a later run finds it by "
        "(default: the folder's own name)",
    )
    intake.add_argument(
        "--agent", default=DEV_AGENT, help=f"the agent that writes (default {DEV_AGENT})"
    )

    token_commands.add_parser(commands, data_dir)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "mcp":
            return _mcp(args)
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
            where = key_path(args)
            sealer = signing.load(where, signing.memory_of(database.url))
            if sealer is None:
                print(f"export not signed: no checkpoint key at {printable(where)}")
            done = await export(database.url, args.file, ProgressBar("export"), sealer)
            print(f"exported {_counted(done.counts)} to {printable(args.file)}")
            return 0
        if args.command == "import":
            # A key that exists before the import checks the file's signatures; one made
            # now only signs the new checkpoint.
            memory = signing.memory_of(database.url)
            known = signing.load(key_path(args), memory)
            key = known or signing.load_or_create(key_path(args), memory)
            done = await import_(database.url, args.file, key, ProgressBar("import"), checker=known)
            for note in done.unchecked:
                print(f"not checked: {note}")
            print(
                f"imported {_counted(done.counts)} into {database.description}; "
                f"checkpoint {done.checkpoint} anchors them"
            )
            return 0
        if args.command == "checkpoint":
            taken = await _checkpoint(database.url, key_path(args), args.new_checkpoint_key)
            made = taken.made
            if made is None:
                print("no new ledger entries since the last checkpoint; nothing to anchor")
            else:
                print(
                    f"checkpoint {made.seq}: {made.entries} new entries, hash {made.hash} "
                    f"(entries of transactions below {made.below_txid})"
                )
            for warning in taken.warnings():
                print(f"edgeloom: {warning}", file=sys.stderr)
            return 1 if taken.strays else 0
        if args.command == "intake":
            return await _intake(args, database.url)
        if args.command == "search-languages":
            return await _search_languages(database.url)
        if args.command == "verify":
            where = key_path(args)
            signer = signing.load(where, signing.memory_of(database.url))
            if signer is None:
                print(f"checkpoint signatures not checked: no checkpoint key at {printable(where)}")
            report = await verify(database.url, signer)
            for problem in report.problems:
                print(problem)
            status = "ok" if report.ok else f"FAILED ({len(report.problems)} problems)"
            print(
                f"verify {status}: {report.records} records, {report.entries} ledger entries, "
                f"{report.memberships} memberships, {report.checkpoints} checkpoints checked "
                f"in {database.description}"
            )
            return 0 if report.ok else 1
        return await token_commands.run(args, engine)
    finally:
        await engine.dispose()


async def _intake(args: argparse.Namespace, url: str) -> int:
    root = Path(args.path)
    if not root.is_dir():
        print(f"edgeloom: {printable(root)} is not a folder", file=sys.stderr)
        return 2
    name = args.folder or root.resolve().name
    # One connection for the reads, the others for the files written at once.
    pool = await create_pool(url, 4)
    try:
        cache = PolicyCache.empty()
        in_force = await policy_store.current(pool, cache)
        if in_force is None:
            print(
                "edgeloom: no policy is in force; start the gateway once ('edgeloom serve') "
                "or apply one",
                file=sys.stderr,
            )
            return 2
        executor = Executor(pool, cache)
        snapshot = Snapshot(pool)
        # Ctrl-C finishes the files being written and begins no other; a second one
        # stops at once (what was committed stays whole either way).
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def stopping() -> None:
            stop.set()
            loop.remove_signal_handler(signal.SIGINT)

        loop.add_signal_handler(signal.SIGINT, stopping)
        try:
            report = await Intake(
                FolderSource(root),
                args.lane,
                name,
                args.agent,
                in_force,
                snapshot,
                lambda command: executor.execute(args.agent, command),
                dry_run=args.dry_run,
                progress=ProgressBar("intake", unit="files", quiet_elsewhere=True),
                stop=stop,
            ).run()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            await snapshot.close()
            await executor.upkeep.finish()
    finally:
        await pool.close()
    for line in report.summary():
        print(line)
    if report.interrupted:
        print("edgeloom: intake interrupted; run it again to complete it", file=sys.stderr)
        return 130
    return 0


def _counted(counts: dict[str, int]) -> str:
    names = {
        "entry": "ledger entries",
        "event": "audit events",
        "checkpoint": "checkpoints",
        "token": "tokens",
        "key": "idempotency keys",
    }
    return ", ".join(f"{counts.get(k, 0)} {v}" for k, v in names.items())


def key_path(args: argparse.Namespace) -> Path:
    """Where the checkpoint key lives: the flag, EDGELOOM_CHECKPOINT_KEY, or beside the data."""
    if args.checkpoint_key is not None:
        return Path(args.checkpoint_key)
    named = os.environ.get("EDGELOOM_CHECKPOINT_KEY")
    return Path(named) if named else Path(args.data_dir).parent / "checkpoint-key.pem"


async def _checkpoint(url: str, key: Path, new_key: bool) -> checkpoints.Taken:
    conn = await connect(url)
    try:
        signer = await checkpoints.open_key(conn, key, url, new_key)
        return await checkpoints.take(conn, signer)
    finally:
        await conn.close()


def _serve(args: argparse.Namespace) -> int:
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
    problem, in_force = asyncio.run(_start(database, settings, exposed=not loopback))
    if problem:
        print(f"edgeloom: refusing to listen on {args.host}: {problem}", file=sys.stderr)
        return 2
    # A key taken over at start signed a checkpoint then: the app (each worker) finds it.
    settings = replace(settings, new_checkpoint_key=False)
    development = args.policy is None and in_force is not None and in_force.yaml == DEV_POLICY_YAML
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
            f"policy version {in_force.version} is not the development policy, so every call "
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


def _mcp(args: argparse.Namespace) -> int:
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
) -> tuple[str | None, PolicyVersion | None]:
    """Migrate, refuse an exposed gateway no agent could call, and settle the policy."""
    from gql.server.policy_startup import ensure_policy

    engine = create_engine(database.url, pool_size=1)
    try:
        await migrate(engine)
        if exposed and await tokens.active_count(engine) == 0:
            problem = (
                "no active bearer token exists, so no agent could call it; mint one first with "
                "'edgeloom token create --agent NAME'"
            )
            return problem, None
        pool = await create_pool(database.url, 1)
        try:
            if settings.checkpoint_key is not None:
                async with pool.acquire() as conn:
                    await checkpoints.open_key(
                        conn, settings.checkpoint_key, database.url, settings.new_checkpoint_key
                    )
            return None, await ensure_policy(Executor(pool, PolicyCache.empty()), settings)
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


async def _search_languages(url: str) -> int:
    policy = await policy_store.in_force_at(url)
    if policy is None:
        print("no policy applied yet: every lane's words stay in 'simple'")
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
