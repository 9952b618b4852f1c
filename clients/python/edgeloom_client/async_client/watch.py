from .base_model import BaseModel
from .enums import WatchChangeKind
from .fragments import RecordFields


class Watch(BaseModel):
    watch: "WatchWatch"


class WatchWatch(BaseModel):
    change: WatchChangeKind
    cursor: str
    record: "WatchWatchRecord"


WatchWatchRecord = RecordFields
Watch.model_rebuild()
WatchWatch.model_rebuild()
