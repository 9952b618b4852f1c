from pydantic import Field

from .base_model import BaseModel
from .fragments import RecordFields


class Traverse(BaseModel):
    traverse: "TraverseTraverse"


class TraverseTraverse(BaseModel):
    not_shown: int = Field(alias="notShown")
    items: list["TraverseTraverseItems"]


class TraverseTraverseItems(BaseModel):
    hop: int
    via: str
    record: "TraverseTraverseItemsRecord"


TraverseTraverseItemsRecord = RecordFields
Traverse.model_rebuild()
TraverseTraverse.model_rebuild()
TraverseTraverseItems.model_rebuild()
