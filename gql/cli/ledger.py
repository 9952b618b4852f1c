"""`edgeloom checkpoint` and `edgeloom verify`: anchor the ledger's new entries in a signed
checkpoint, and check the ledger and its projections."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gql.cli.options import NEW_KEY_HELP, Commands, key_path
from store.database import Database
from store.operations import checkpoints, signing
from store.operations.verify import verify
from store.pool import connect
from store.printable import printable


def add_verify(commands: Commands, data_dir: argparse.ArgumentParser) -> None:
    """The `verify` command."""
    commands.add_parser(
        "verify",
        parents=[data_dir],
        help="check the ledger's hash chains and that projections equal a rebuild",
        description="Exit 0 when ledger and projections agree; 1 listing the differences.",
    )


def add_checkpoint(commands: Commands, data_dir: argparse.ArgumentParser) -> None:
    """The `checkpoint` command and its options."""
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


async def run_verify(args: argparse.Namespace, database: Database) -> int:
    where = key_path(args)
    signer = signing.load(where, signing.memory_of(database.url))
    if signer is None:
        print(f"checkpoint signatures not checked: no checkpoint key at {printable(where)}")
    report = await verify(database.url, signer)
    for problem in report.problems:
        print(problem)
    # Erased entries are no problem: each is named with the erasure that vouches for it.
    for erased in report.erased:
        print(erased)
    status = "ok" if report.ok else f"FAILED ({len(report.problems)} problems)"
    erased = f", {len(report.erased)} of them erased" if report.erased else ""
    print(
        f"verify {status}: {report.records} records, {report.entries} ledger entries{erased}, "
        f"{report.memberships} memberships, {report.checkpoints} checkpoints checked "
        f"in {database.description}"
    )
    return 0 if report.ok else 1


async def run_checkpoint(args: argparse.Namespace, database: Database) -> int:
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


async def _checkpoint(url: str, key: Path, new_key: bool) -> checkpoints.Taken:
    conn = await connect(url)
    try:
        signer = await checkpoints.open_key(conn, key, url, new_key)
        return await checkpoints.take(conn, signer)
    finally:
        await conn.close()
