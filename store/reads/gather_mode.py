"""How a gather combines the edge properties it is given, a value every read that
gathers (`gather`, `search`'s `match`, the feed's filters) takes the same way."""

from __future__ import annotations

import enum


class GatherMode(enum.Enum):
    INTERSECT = "INTERSECT"
    UNION = "UNION"
    TIMELINE = "TIMELINE"
