"""A record's embedding: the caller's vector for its content, as the ledger keeps it.

Held as float32 values (what pgvector stores), packed little-endian: compact in memory
and compared exactly. In a ledger entry's state each number is a decimal text that reads
back as the same float32 (`to_texts`), as a JSON string, so the entry's canonical bytes
hold no number format two JSON writers could disagree on, and PostgreSQL reads each as
the same `real` the index holds.

A vector's length (Euclidean norm) is held between MIN_NORM and MAX_NORM: pgvector's cosine
distance sums the squares and the products of the numbers in 32-bit floats, so a length
whose square passes the float32 range (about 3.4e38) makes that sum infinite, and one whose
square falls below its smallest normal number (about 1.2e-38) makes it zero; either way the
distance is NaN or 0 against every vector, whatever direction they share. The bounds keep a
margin from both edges, so a sum rounded in float32 stays inside.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from policies.model import MAX_EMBEDDING_DIMENSIONS
from store.errors import InvalidInputError

MIN_NORM, MAX_NORM = 1e-18, 1e19
_RANGE = "1e-18..1e19"


def pack(values: Sequence[float], what: str = "embedding") -> bytes:
    """The vector as float32 values, or a refusal naming what is wrong with it."""
    if not values:
        raise InvalidInputError(f"{what} is empty: give the vector's numbers, or omit it")
    if len(values) > MAX_EMBEDDING_DIMENSIONS:
        raise InvalidInputError(
            f"{what} has {len(values)} numbers; a vector has at most {MAX_EMBEDDING_DIMENSIONS}",
            allowed=MAX_EMBEDDING_DIMENSIONS,
        )
    for n, value in enumerate(values):
        if not math.isfinite(value):
            raise InvalidInputError(
                f"{what}[{n}] is {value}: every number of a vector must be finite (no NaN "
                "or infinity)"
            )
    try:
        packed = struct.pack(f"<{len(values)}f", *values)
    except OverflowError as exc:
        raise InvalidInputError(
            f"{what} holds a number past the range of a 32-bit float (about 3.4e38)"
        ) from exc
    floats = unpack(packed)
    if not any(floats):
        raise InvalidInputError(
            f"{what} is all zeros: a vector with no direction has no cosine distance to any other"
        )
    norm = math.hypot(*floats)
    if not MIN_NORM <= norm <= MAX_NORM:
        raise InvalidInputError(
            f"{what} has a length (Euclidean norm) of {norm:.3g}; a vector's length must be "
            "between 1e-18 and 1e19, so that its cosine distance, computed in 32-bit floats, "
            "is defined: scale it (any length in that range compares the same)",
            allowed=_RANGE,
        )
    return packed


def unpack(packed: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(packed) // 4}f", packed)


def size(packed: bytes) -> int:
    return len(packed) // 4


def to_texts(packed: bytes) -> list[str]:
    """The ledger's form: each number as a decimal text of seven significant digits when
    that reads back as the same float32, else of nine (which always does)."""
    values = unpack(packed)
    texts = [f"{v:.7g}" for v in values]
    back = unpack(struct.pack(f"<{len(texts)}f", *map(float, texts)))
    return [t if b == v else f"{v:.9g}" for t, b, v in zip(texts, back, values, strict=True)]


def from_texts(texts: Sequence[str]) -> bytes:
    return struct.pack(f"<{len(texts)}f", *(float(t) for t in texts))
