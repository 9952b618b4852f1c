from enum import Enum


class GatherMode(str, Enum):
    INTERSECT = "INTERSECT"
    UNION = "UNION"
    TIMELINE = "TIMELINE"
