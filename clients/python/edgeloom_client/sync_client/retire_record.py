from pydantic import Field

from .base_model import BaseModel
from .fragments import RecordFields


class RetireRecord(BaseModel):
    retire_record: "RetireRecordRetireRecord" = Field(alias="retireRecord")


RetireRecordRetireRecord = RecordFields
RetireRecord.model_rebuild()
