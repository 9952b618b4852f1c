"""What several `edgeloom` commands share: the data folder and checkpoint key options, the
development agent, and where the checkpoint key lives."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TypeAlias

from store.database import DEFAULT_DATA_DIR

# The subcommands of `edgeloom`, to which each command's module adds its own.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

DEV_AGENT = "dev"
NEW_KEY_HELP = (
    "sign with the checkpoint key given (made if missing) although this memory's newest "
    "checkpoints were signed by another key; refused without it"
)


def data_options() -> argparse.ArgumentParser:
    """The options of every command's database: its data folder and checkpoint key."""
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
    return data_dir


def key_path(args: argparse.Namespace) -> Path:
    """Where the checkpoint key lives: the flag, EDGELOOM_CHECKPOINT_KEY, or beside the data."""
    if args.checkpoint_key is not None:
        return Path(args.checkpoint_key)
    named = os.environ.get("EDGELOOM_CHECKPOINT_KEY")
    return Path(named) if named else Path(args.data_dir).parent / "checkpoint-key.pem"
