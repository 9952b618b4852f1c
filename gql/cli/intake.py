"""`edgeloom intake`: build or refresh memory from a folder of notes."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from gql.cli.options import DEV_AGENT, Commands
from gql.cli.progress import ProgressBar
from policies.errors import UnknownAgentError
from policies.model import Policy
from store.intake.run import Intake
from store.intake.sources import FolderSource
from store.kinds.policy import in_force as policy_store
from store.kinds.policy.in_force import PolicyCache
from store.ledger.executor import Executor
from store.pool import create_pool
from store.printable import printable
from store.reads.lane_floor import Lanes
from store.reads.snapshot import Snapshot


def add_parser(commands: Commands, data_dir: argparse.ArgumentParser) -> None:
    """The `intake` command and its options."""
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


async def run(args: argparse.Namespace, url: str) -> int:
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
        snapshot = Snapshot(pool, lanes=lambda: _readable(in_force.policy, args.agent))
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


async def _readable(policy: Policy, agent: str) -> Lanes:
    """The lanes PostgreSQL lets the intake's reads see: the agent's (none for an agent
    the policy does not name, which the intake refuses)."""
    try:
        return Lanes.of(policy.agent(agent).readable_lanes(policy))
    except UnknownAgentError:
        return Lanes.of(())
