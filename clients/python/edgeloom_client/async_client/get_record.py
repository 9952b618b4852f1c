from typing import Optional

from .base_model import BaseModel
from .fragments import RecordFields


class GetRecord(BaseModel):
    record: Optional["GetRecordRecord"]


GetRecordRecord = RecordFields
GetRecord.model_rebuild()
