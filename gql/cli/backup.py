"""`edgeloom export` and `edgeloom import`: the whole memory to a file, and back into an
empty database."""

from __future__ import annotations

import argparse
from pathlib import Path

from gql.cli.options import Commands, key_path
from gql.cli.progress import ProgressBar
from store.database import Database
from store.operations import signing
from store.operations.export import export
from store.operations.restore import import_
from store.printable import printable


def add_parsers(commands: Commands, data_dir: argparse.ArgumentParser) -> None:
    """The `export` and `import` commands."""
    writing = commands.add_parser(
        "export",
        parents=[data_dir],
        help="write the whole memory to a file (gzip JSON Lines), consistent while writers run",
    )
    writing.add_argument("file", type=Path, help="where to write, e.g. memory.jsonl.gz")
    reading = commands.add_parser(
        "import",
        parents=[data_dir],
        help="fill an empty database from an export; verify passes afterwards",
    )
    reading.add_argument("file", type=Path, help="a file written by 'edgeloom export'")


async def run_export(args: argparse.Namespace, database: Database) -> int:
    where = key_path(args)
    sealer = signing.load(where, signing.memory_of(database.url))
    if sealer is None:
        print(f"export not signed: no checkpoint key at {printable(where)}")
    done = await export(database.url, args.file, ProgressBar("export"), sealer)
    print(f"exported {_counted(done.counts)} to {printable(args.file)}")
    return 0


async def run_import(args: argparse.Namespace, database: Database) -> int:
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


def _counted(counts: dict[str, int]) -> str:
    names = {
        "entry": "ledger entries",
        "event": "audit events",
        "checkpoint": "checkpoints",
        "token": "tokens",
        "key": "idempotency keys",
    }
    return ", ".join(f"{counts.get(k, 0)} {v}" for k, v in names.items())
