from enum import Enum


class GatherMode(str, Enum):
    INTERSECT = "INTERSECT"
    UNION = "UNION"
    TIMELINE = "TIMELINE"


class WatchChangeKind(str, Enum):
    JOINED = "JOINED"
    LEFT = "LEFT"
    CHANGED = "CHANGED"
