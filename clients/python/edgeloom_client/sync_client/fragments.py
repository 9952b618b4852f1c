from datetime import datetime
from typing import Optional

from pydantic import Field

from .base_model import BaseModel


class PageInfoFields(BaseModel):
    has_next_page: bool = Field(alias="hasNextPage")
    end_cursor: Optional[str] = Field(alias="endCursor")


class RecordFields(BaseModel):
    id: str
    lane: str
    source_type: str = Field(alias="sourceType")
    content: str
    version: int
    created_at: datetime = Field(alias="createdAt")
    updated_at: datetime = Field(alias="updatedAt")
    created_by: str = Field(alias="createdBy")
    properties: list[str]
    retired: Optional["RecordFieldsRetired"]


class RecordFieldsRetired(BaseModel):
    at: datetime
    actor: str
    reason: Optional[str]


PageInfoFields.model_rebuild()
RecordFields.model_rebuild()
