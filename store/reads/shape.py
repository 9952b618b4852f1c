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
    """What changes the statement of a page nested in a read's answer (a hyperedge's
    members, the edges at one end of `related`'s record): whether it goes on after a
    cursor. A read declared in the registry (`store.reads.registry`) has a shape of its
    own."""

    after: bool = False
