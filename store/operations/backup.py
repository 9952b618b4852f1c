"""The export file: the whole memory as a portable, streaming file, and what export and
import share of it.

The file is gzip-compressed JSON Lines (docs/operations.md, "Backups"): a header line, then one
object per line: `entry` (every ledger entry, by kind, object and version), `key`
(idempotency keys, which live beside the ledger), `event` (every audit event, in feed
order), `checkpoint`, `token` (hashes only, never secrets), and a closing `end` line
with the counts, so a truncated file is refused rather than half-imported, and the
SHA-256 of the lines before it, signed with the checkpoint key when there is one: the
checkpoints cover only the entries before the newest of them, the signature every line.

Export (`store.operations.export`) writes it from one snapshot while writers run; import
(`store.operations.restore`) fills an empty database from it, all or nothing, once it has
checked what `verify` would.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from policies.properties import MAX_LABEL_LENGTH, MAX_VALUE_LENGTH
from store.errors import StoreError
from store.limits import MAX_CONTENT_CHARS, MAX_PROPERTIES

FORMAT = "edgeloom-export"
VERSION = 1
BATCH = 5000

Progress = Callable[[int, int], None]


class BackupError(StoreError):
    """An export or import that cannot proceed; the message says why and what to do."""


@dataclass
class Summary:
    counts: dict[str, int] = field(default_factory=dict)
    checkpoint: int | None = None
    unchecked: list[str] = field(default_factory=list)  # what the import could not check


def sealed_bytes(digest: str) -> bytes:
    """The bytes an export's signature covers: the SHA-256 of every line before its last."""
    return f"edgeloom-export/1\n{digest}\n".encode()


# The longest line an export holds is an entry of a record at every limit: 1,000,000
# characters of content and 256 edge properties of a 128-character label and a
# 1024-character value, each character at most 6 bytes as JSON writes it ("\u0001";
# non-ASCII text is written as UTF-8, at most 4 bytes), with 64 KiB for its other fields:
# 7,837,056 bytes. A policy version's YAML arrives in one request body of at most 8 MiB
# and is written no longer than it came. 16 MiB holds both.
RECORD_LINE_BYTES = (
    6 * MAX_CONTENT_CHARS
    + MAX_PROPERTIES * (6 * (MAX_LABEL_LENGTH + MAX_VALUE_LENGTH) + len('["",""],'))
    + 64 * 1024
)
MAX_LINE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Line:
    number: int
    raw: bytes
    value: dict[str, Any]


def read_lines(path: Path, limit: int = MAX_LINE_BYTES) -> Iterator[Line]:
    """The export's lines, parsed; a damaged file is a refusal that names the line. No
    line longer than `limit` bytes is read whole, so memory stays bounded whatever the
    file holds."""
    try:
        with gzip.open(path, "rb") as handle:
            number = 0
            while line := handle.readline(limit + 1):
                number += 1
                if len(line) > limit:
                    raise BackupError(
                        f"{path} line {number} is longer than {limit:,} bytes, the most an "
                        "export line holds; nothing was imported"
                    )
                try:
                    value = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise BackupError(f"{path} line {number} is not JSON: {exc}") from exc
                if not isinstance(value, dict) or "t" not in value:
                    raise BackupError(f"{path} line {number} is not an export line")
                yield Line(number, line, value)
    except (OSError, EOFError, zlib.error) as exc:
        raise BackupError(f"cannot read '{path}' as a complete gzip file: {exc}") from exc
