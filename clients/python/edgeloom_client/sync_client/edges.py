from datetime import datetime
from typing import Any, Optional

from pydantic import Field

from .base_model import BaseModel
from .fragments import PageInfoFields


class Edges(BaseModel):
    edges: "EdgesEdges"


class EdgesEdges(BaseModel):
    total_count: int = Field(alias="totalCount")
    items: list["EdgesEdgesItems"]
    page_info: "EdgesEdgesPageInfo" = Field(alias="pageInfo")


class EdgesEdgesItems(BaseModel):
    id: str
    from_id: str = Field(alias="fromId")
    to_id: str = Field(alias="toId")
    type_: str = Field(alias="type")
    weight: float
    namespace: str
    confidence: Optional[float]
    evidence: Optional[Any]
    conflict_state: Optional[str] = Field(alias="conflictState")
    valid_at: datetime = Field(alias="validAt")
    invalid_at: Optional[datetime] = Field(alias="invalidAt")
    expired_at: Optional[datetime] = Field(alias="expiredAt")
    created_at: datetime = Field(alias="createdAt")
    updated_at: datetime = Field(alias="updatedAt")


EdgesEdgesPageInfo = PageInfoFields
Edges.model_rebuild()
EdgesEdges.model_rebuild()
