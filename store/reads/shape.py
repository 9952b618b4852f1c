"""What of a read's arguments changes its statement's text: one shape per set of them.

A read's builder takes its shape and writes the same SQL whichever path renders the
rows (the resolvers' rows, or the compiled path's JSON); its binder checks the
arguments, puts their values under their parameters' names, and says the shape.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class GatherMode(enum.Enum):
    INTERSECT = "INTERSECT"
    UNION = "UNION"
    TIMELINE = "TIMELINE"


@dataclass(frozen=True)
class Shape:
    """The arguments of one read that change its statement, for one request."""

    as_of: bool = False
    after: bool = False
