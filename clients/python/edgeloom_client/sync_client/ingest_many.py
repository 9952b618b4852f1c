from pydantic import Field

from .base_model import BaseModel
from .fragments import RecordFields


class IngestMany(BaseModel):
    ingest_many: list["IngestManyIngestMany"] = Field(alias="ingestMany")


IngestManyIngestMany = RecordFields
IngestMany.model_rebuild()
