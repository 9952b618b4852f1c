from pydantic import Field

from .base_model import BaseModel
from .fragments import RecordFields


class RestoreRecord(BaseModel):
    restore_record: "RestoreRecordRestoreRecord" = Field(alias="restoreRecord")


RestoreRecordRestoreRecord = RecordFields
RestoreRecord.model_rebuild()
