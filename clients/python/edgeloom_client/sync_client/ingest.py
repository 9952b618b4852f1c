from typing import Optional

from pydantic import Field

from .base_model import BaseModel
from .fragments import (
    RecordFields,
    RecordFieldsRetired,  # noqa: F401
)


class Ingest(BaseModel):
    ingest: "IngestIngest"


class IngestIngest(RecordFields):
    warnings: list["IngestIngestWarnings"]


class IngestIngestWarnings(BaseModel):
    code: str
    message: str
    property_: Optional[str] = Field(alias="property")
    similar_to: Optional[str] = Field(alias="similarTo")


Ingest.model_rebuild()
IngestIngest.model_rebuild()
